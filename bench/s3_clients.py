"""The cost of two Python S3 clients against a real SeaweedFS (tests/cluster/s3.py): boto3
(botocore) and the Apache-2.0 `minio` client. What planops' choice rests on (docs/artifacts.md,
"The client"): import time, resident memory after import and one client, and CPU time per PUT
and per GET of a small object and of a 10 MiB one.

Each client is measured in fresh Python processes (an import is paid once per process); both
need to be installed in the interpreter given (not planops' own dependencies: boto3 pins an
older python-dateutil than the Kubernetes client wants):

    python3 -m venv /tmp/s3bench && /tmp/s3bench/bin/pip install minio boto3
    .venv/bin/python -m bench.s3_clients --python /tmp/s3bench/bin/python [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from typing import Any

from tests.cluster.s3 import S3, server

SMALL = 1024
BIG = 10 << 20

#: run in a fresh process: prints the import's wall time, the RSS after it and a client,
#: and the CPU time of each PUT and GET (small and big), as JSON
_CHILD = r"""
import json, os, resource, sys, time
which, endpoint, bucket, ak, sk, rounds = sys.argv[1:7]
rounds = int(rounds)
t0 = time.perf_counter()
if which == "minio":
    import io
    from minio import Minio
else:
    import io
    import boto3
    from botocore.config import Config
imported = time.perf_counter() - t0
if which == "minio":
    host = endpoint.split("://")[1]
    c = Minio(host, access_key=ak, secret_key=sk, secure=False, region="us-east-1")
    def put(k, d): c.put_object(bucket, k, io.BytesIO(d), len(d))
    def delete(k): c.remove_object(bucket, k)
    def get(k):
        r = c.get_object(bucket, k)
        try: return r.read()
        finally: r.close(); r.release_conn()
else:
    c = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk,
                     region_name="us-east-1", config=Config(signature_version="s3v4"))
    def put(k, d): c.put_object(Bucket=bucket, Key=k, Body=d)
    def delete(k): c.delete_object(Bucket=bucket, Key=k)
    def get(k): return c.get_object(Bucket=bucket, Key=k)["Body"].read()
client_made = time.perf_counter() - t0
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1]) * 1024
rss_client = rss()
out = {"import_s": imported, "client_s": client_made, "rss_client": rss_client}
for label, size in (("small", 1024), ("big", 10 << 20)):
    data = os.urandom(size)
    put(f"bench/{which}/warm-{label}", data); get(f"bench/{which}/warm-{label}")
    for op in ("put", "get"):
        cpu = []
        for i in range(rounds):
            c0 = time.process_time()
            if op == "put": put(f"bench/{which}/{label}-{i}", data)
            else: assert len(get(f"bench/{which}/{label}-{i}")) == size
            cpu.append(time.process_time() - c0)
        out[f"{op}_{label}_cpu_ms"] = 1000 * sorted(cpu)[len(cpu) // 2]
    for i in range(rounds):
        delete(f"bench/{which}/{label}-{i}")
out["rss_after"] = rss()
out["maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(out))
"""


def measure(python: str, which: str, s3: S3, rounds: int) -> dict[str, Any]:
    argv = [python, "-c", _CHILD, which, s3.endpoint, s3.bucket, s3.access_key, s3.secret_key]
    done = subprocess.run([*argv, str(rounds)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{which} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--rounds", type=int, default=20, help="requests per figure (median)")
    parser.add_argument("--processes", type=int, default=5, help="fresh processes per client")
    args = parser.parse_args()
    with server() as s3:
        results: dict[str, dict[str, float]] = {}
        for which in ("minio", "boto3"):
            runs = [measure(args.python, which, s3, args.rounds) for _ in range(args.processes)]
            results[which] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"{'':22}" + "".join(f"{w:>12}" for w in results))
    rows = [
        ("import (ms)", "import_s", 1000),
        ("import+client (ms)", "client_s", 1000),
        ("RSS, one client (MiB)", "rss_client", 1 / 2**20),
        ("RSS after (MiB)", "rss_after", 1 / 2**20),
        ("CPU PUT 1 KiB (ms)", "put_small_cpu_ms", 1),
        ("CPU GET 1 KiB (ms)", "get_small_cpu_ms", 1),
        ("CPU PUT 10 MiB (ms)", "put_big_cpu_ms", 1),
        ("CPU GET 10 MiB (ms)", "get_big_cpu_ms", 1),
    ]
    for label, key, scale in rows:
        print(f"{label:22}" + "".join(f"{results[w][key] * scale:12.1f}" for w in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
