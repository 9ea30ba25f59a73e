"""Simulated nodes for the test cluster: KWOK (sigs.k8s.io/kwok) plays the kubelet of Node
objects it manages, so step pods scheduled there move Pending -> Running -> Succeeded (or Failed)
without running anything. Hundreds of nodes and thousands of pods then cost the API server what
they cost in a real cluster, and this machine almost nothing else: what scale measures (the
operator, the API server, the controllers) is real; only the containers are not.

    python3 tests/cluster/kwok.py up --kubeconfig KC --state DIR --nodes N [--name kwok]
                                     [--run-ms 1000] [--start-ms 0]
    python3 tests/cluster/kwok.py down --state DIR       # stops kwok, deletes its Nodes
    python3 tests/cluster/kwok.py status --state DIR
    python3 tests/cluster/kwok.py output --kubeconfig KC --state DIR NAMESPACE TEXT
                                        # what the simulated steps of NAMESPACE print

`tests/cluster/up --kwok-nodes N` runs `up` with the cluster directory's admin kubeconfig and
DIR = <cluster dir>/kwok; tests import this module to start nodes of their own on a cluster whose
`up` did not. Standard library only (like the other scripts here): it runs before any venv.

What a simulated node is:
- a Node labelled `type=kwok` and `planops.dev/kwok=<name>` (kwok manages the nodes with that
  label: two kwok processes on one cluster never share a node), tainted
  `kwok.x-k8s.io/node=fake:NoSchedule` so that only pods that tolerate it land there (a Capsule
  says so with nodeSelector and tolerations, docs/test-cluster.md); named `<name>-<i>`;
- its address is 127.0.0.1 and its kubelet port is kwok's own server (TLS with kwok's built-in
  certificate: the test API server does not verify kubelets), which answers log requests.

What a step pod does there (the pod stages below; a pod of a Job only, others stay Running):
- Pending -> Running after --start-ms; Running -> Succeeded (exit 0) after --run-ms, or after N
  seconds for a command `sleep N` (so long steps stay active, as on a real node);
- a step whose command is `false` fails with exit code 1, as it would on a real node: the
  documented way to make a simulated step fail;
- its log (the step's output, which the operator reads through the API server as from a
  kubelet) is the text `output` gave its namespace, one ClusterLogs object per namespace; a
  namespace without one has no log, and a successful step there fails once the operator gives up
  waiting for it ("the node did not serve the log"). Every step of a namespace prints the same
  text: kwok serves logs from files chosen by namespace and pod name, never by what a pod runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("PLANOPS_CACHE", Path.home() / ".cache" / "planops"))
TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
NODE_LABEL = {"type": "kwok"}
#: what a Capsule needs to run its steps on simulated nodes (and only there)
PLACEMENT = {
    "nodeSelector": dict(NODE_LABEL),
    "tolerations": [{"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}],
}
INSTANCE_LABEL = "planops.dev/kwok"
#: pod IPs kwok hands out: fake, only written into pod status; outside the cluster's service
#: range and the real node's pod bridge
POD_CIDR = "10.246.0.0/16"


def versions() -> dict[str, str]:
    env = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.split("=", 1)
            env[k.strip()] = v.split("#", 1)[0].strip()
    return env


def kwok_dir() -> Path:
    return CACHE / "bin" / f"kwok-{versions()['KWOK_VERSION']}"


def kubectl_bin() -> Path:
    return CACHE / "bin" / f"kubernetes-{versions()['K8S_VERSION']}" / "kubectl"


def log(msg: str) -> None:
    print(f"[kwok] {msg}", file=sys.stderr, flush=True)


def kubectl(kubeconfig: str, *args: str, input: str | None = None, check: bool = True) -> str:
    proc = subprocess.run(
        [str(kubectl_bin()), "--kubeconfig", kubeconfig, *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and proc.returncode != 0:
        raise SystemExit(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def apply(kubeconfig: str, objs: list[dict[str, Any]]) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})
    kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", "-", input=body)


# -- what kwok is told ----------------------------------------------------------------------


def _job_pod(*extra: dict[str, Any]) -> dict[str, Any]:
    """A stage selector: running pods of a Job that are not being deleted."""
    return {
        "matchExpressions": [
            {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
            {"key": ".status.phase", "operator": "In", "values": ["Running"]},
            {"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]},
            *extra,
        ]
    }


_FIRST_WORD = ".spec.containers.[0].command.[0]"
#: kwok's template functions (Now, Quote, NodeIPWith, PodIPWith) are its own
_START = """
{{ $now := Now }}
conditions:
- {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  started: true
  state: {running: {startedAt: {{ $now | Quote }}}}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName false .metadata.uid .metadata.name .metadata.namespace | Quote }}
phase: Running
startTime: {{ $now | Quote }}
"""
_END = """
{{ $now := Now }}
{{ $started := or .status.startTime $now }}
conditions:
{{ range list "Ready" "ContainersReady" }}
- {type: {{ . }}, status: "False", reason: PodCompleted, lastTransitionTime: {{ $now | Quote }}}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: EXIT
      reason: REASON
      startedAt: {{ $started | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
phase: PHASE
"""


def stages(start_ms: int, run_ms: int) -> list[dict[str, Any]]:
    """planops' pod stages (kwok's node stages come from its module, see tests/cluster/build)."""

    def stage(name: str, selector: dict[str, Any], template: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": name},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                "selector": selector,
                "next": {"statusTemplate": template} if template else {"delete": True},
                **spec,
            },
        }

    def end(code: int, reason: str, phase: str) -> str:
        out = _END.replace("EXIT", str(code)).replace("REASON", reason)
        return out.replace("PHASE", phase)

    # `sleep N` runs N seconds; anything else --run-ms (jq: no output means the default)
    sleep = '.spec.containers.[0].command | select(.[0] == "sleep") | (.[1] // "") + "s"'
    return [
        stage(
            "planops-pod-start",
            {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
                    {"key": ".spec.nodeName", "operator": "Exists"},
                ]
            },
            _START,
            delay={"durationMilliseconds": start_ms},
        ),
        stage(
            "planops-pod-succeed",
            _job_pod({"key": _FIRST_WORD, "operator": "NotIn", "values": ["false"]}),
            end(0, "Completed", "Succeeded"),
            delay={"durationMilliseconds": run_ms, "durationFrom": {"jq": {"expression": sleep}}},
        ),
        stage(
            "planops-pod-fail",
            _job_pod({"key": _FIRST_WORD, "operator": "In", "values": ["false"]}),
            end(1, "Error", "Failed"),
            delay={"durationMilliseconds": run_ms},
        ),
        stage(
            "planops-pod-delete",
            {"matchExpressions": [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}]},
            "",
        ),
    ]


def configuration(name: str, port: int, start_ms: int, run_ms: int) -> str:
    """kwok's --config: its options, kwok's node stages and planops' pod stages."""
    options = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": {
            "manageNodesWithLabelSelector": f"{INSTANCE_LABEL}={name}",
            "nodeIP": "127.0.0.1",
            "nodePort": port,
            "serverAddress": f"127.0.0.1:{port}",
            "cidr": POD_CIDR,
            "nodeLeaseDurationSeconds": 40,
            "enableCRDs": ["ClusterLogs"],
            "enableDebuggingHandlers": True,  # the log endpoint
            "enableProfilingHandler": False,
            # stages applied at once: the default (4) is the bound at a few hundred pods per second
            "podPlayStageParallelism": 16,
            # a config file's options replace kwok's defaults rather than override them
            "nodePlayStageParallelism": 4,
            "nodeLeaseParallelism": 4,
            "podsOnNodeSyncParallelism": 4,
            "enablePodsOnNodeSyncListPager": True,
        },
    }
    docs = [json.dumps(options)]
    docs += [p.read_text() for p in sorted((kwok_dir() / "stages").glob("*.yaml"))]
    docs += [json.dumps(s) for s in stages(start_ms, run_ms)]
    return "\n---\n".join(docs) + "\n"


def node(instance: str, name: str, pods: int) -> dict[str, Any]:
    capacity = {"cpu": "32", "memory": "256Gi", "pods": str(pods)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                **NODE_LABEL,
                INSTANCE_LABEL: instance,
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"taints": [dict(TAINT)]},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


# -- the process -----------------------------------------------------------------------------


@dataclass
class Kwok:
    """One kwok process and its nodes; its state (config, pid, log, log files) lives in `state`."""

    kubeconfig: str
    state: Path
    name: str = "kwok"

    def __post_init__(self) -> None:
        self.state = self.state.resolve()  # the command line names it: `pid` checks by it

    @property
    def selector(self) -> str:
        return f"{INSTANCE_LABEL}={self.name}"

    def pid(self) -> int | None:
        """The pid of *our* kwok, if it runs (never a recycled pid: checked by command line)."""
        try:
            pid = int((self.state / "kwok.pid").read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            return None
        ours = str(kwok_dir() / "kwok").encode(), str(self.state / "kwok.yaml").encode()
        return pid if cmdline[0] == ours[0] and any(ours[1] in a for a in cmdline) else None

    def up(self, nodes: int, start_ms: int = 0, run_ms: int = 1000, pods: int = 110) -> None:
        if not (kwok_dir() / "kwok").exists():
            raise SystemExit(f"kwok is not built: run tests/cluster/build kwok ({kwok_dir()})")
        self.state.mkdir(parents=True, exist_ok=True)
        (self.state / "name").write_text(self.name)
        crd = kwok_dir() / "crds" / "kwok.x-k8s.io_clusterlogs.yaml"
        kubectl(self.kubeconfig, "apply", "--server-side", "-f", str(crd))
        kubectl(
            self.kubeconfig,
            "wait",
            "--for=condition=Established",
            "crd/clusterlogs.kwok.x-k8s.io",
            "--timeout=60s",
        )
        if self.pid() is None:
            port = self._port()
            config = self.state / "kwok.yaml"
            config.write_text(configuration(self.name, port, start_ms, run_ms))
            with (self.state / "kwok.log").open("ab") as out:
                proc = subprocess.Popen(
                    [
                        str(kwok_dir() / "kwok"),
                        f"--kubeconfig={self.kubeconfig}",
                        f"--config={config}",
                        "--v=WARN",  # INFO logs every patch of every pod
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            (self.state / "kwok.pid").write_text(str(proc.pid))
        apply(self.kubeconfig, [node(self.name, f"{self.name}-{i}", pods) for i in range(nodes)])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.pid() is None:
                tail = (self.state / "kwok.log").read_text(errors="replace")[-3000:]
                raise SystemExit(f"kwok exited; its log ({self.state / 'kwok.log'}):\n{tail}")
            if self.ready() >= nodes:
                log(f"{nodes} simulated nodes Ready ({self.selector}); state in {self.state}")
                return
            time.sleep(0.5)
        raise SystemExit(f"simulated nodes not Ready after 120s: see {self.state / 'kwok.log'}")

    def _port(self) -> int:
        """kwok's server port: the one its nodes already advertise when it is started again
        (nodes keep their kubelet port until their next heartbeat, minutes later)."""
        saved = self.state / "port"
        with contextlib.suppress(OSError, ValueError):
            return int(saved.read_text())
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        saved.write_text(str(port))
        return port

    def ready(self) -> int:
        out = kubectl(self.kubeconfig, "get", "nodes", "-l", self.selector, "-o", "json")
        n = 0
        for item in json.loads(out)["items"]:
            for c in (item.get("status") or {}).get("conditions") or []:
                n += c.get("type") == "Ready" and c.get("status") == "True"
        return n

    def down(self, delete_nodes: bool = True) -> None:
        """Deletes our Nodes (their pods are removed by the pod GC), then stops kwok."""
        if delete_nodes:
            kubectl(self.kubeconfig, "delete", "nodes", "-l", self.selector, "--wait=false")
        if (pid := self.pid()) is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
            for _ in range(40):
                if self.pid() is None:
                    break
                time.sleep(0.25)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)

    def output(self, namespace: str, text: str) -> None:
        """What every simulated step of `namespace` prints (its log: the step's output), as a
        ClusterLogs object serving a file of this state directory, in the CRI log format."""
        logs = self.state / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        path = logs / f"{namespace}.log"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime())
        lines = text.splitlines()
        path.write_text("".join(f"{stamp} stdout F {line}\n" for line in lines))
        apply(
            self.kubeconfig,
            [
                {
                    "apiVersion": "kwok.x-k8s.io/v1alpha1",
                    "kind": "ClusterLogs",
                    "metadata": {"name": f"planops-{namespace}"},
                    "spec": {
                        "selector": {"matchNamespaces": [namespace]},
                        "logs": [{"logsFile": str(path)}],
                    },
                }
            ],
        )

    def forget_output(self, namespace: str) -> None:
        kubectl(
            self.kubeconfig,
            "delete",
            "clusterlogs.kwok.x-k8s.io",
            f"planops-{namespace}",
            "--ignore-not-found",
        )
        (self.state / "logs" / f"{namespace}.log").unlink(missing_ok=True)


def any_ready(kubeconfig: str) -> bool:
    """Does the cluster have a Ready simulated node (of any kwok, e.g. `up --kwok-nodes`)?"""
    out = kubectl(kubeconfig, "get", "nodes", "-l", INSTANCE_LABEL, "-o", "json")
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for n in json.loads(out)["items"]
        for c in (n.get("status") or {}).get("conditions") or []
    )


@contextlib.contextmanager
def simulated_nodes(
    kubeconfig: str, state: Path, name: str, nodes: int, run_ms: int = 1000
) -> Iterator[Kwok]:
    """The cluster's simulated nodes when it has some, else `nodes` of our own (a kwok process
    named `name`), stopped and deleted on exit. Either way `output` works (any kwok serves it)."""
    if not (kwok_dir() / "kwok").exists():
        subprocess.run([str(HERE / "build"), "kwok"], check=True, stdout=subprocess.DEVNULL)
    if any_ready(kubeconfig):
        yield Kwok(kubeconfig, state, name="")
        return
    own = Kwok(kubeconfig, state, name=name)
    try:
        own.up(nodes, run_ms=run_ms)
        yield own
    finally:
        own.down()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start kwok and N simulated nodes")
    up.add_argument("--nodes", type=int, required=True)
    up.add_argument("--name", default="kwok", help="node name prefix and instance label")
    up.add_argument("--start-ms", type=int, default=0, help="Pending -> Running")
    up.add_argument("--run-ms", type=int, default=1000, help="Running -> Succeeded/Failed")
    up.add_argument("--pods-per-node", type=int, default=110)
    down = sub.add_parser("down", help="stop kwok and delete its nodes")
    down.add_argument("--keep-nodes", action="store_true", help="(the cluster goes down too)")
    sub.add_parser("status", help="does kwok run, how many of its nodes are Ready")
    out = sub.add_parser("output", help="what simulated steps of NAMESPACE print")
    out.add_argument("namespace")
    out.add_argument("text")
    for p in (up, down, out, sub.choices["status"]):
        p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG", ""))
        p.add_argument("--state", type=Path, required=True)
    args = ap.parse_args()
    name_file = args.state / "name"
    name = args.name if args.cmd == "up" else (name_file.read_text() if name_file.exists() else "")
    k = Kwok(args.kubeconfig, args.state, name or "kwok")
    if args.cmd == "up":
        if args.nodes < 1:
            raise SystemExit("--nodes: at least 1")
        k.up(args.nodes, args.start_ms, args.run_ms, args.pods_per_node)
    elif args.cmd == "down":
        if name:
            k.down(delete_nodes=not args.keep_nodes)
    elif args.cmd == "status":
        if not name:
            print(f"{'kwok':<24} not started")
            raise SystemExit(1)
        pid = k.pid()
        state = f"running (pid {pid})" if pid else "stopped"
        ready = k.ready() if args.kubeconfig else "?"
        print(f"{'kwok':<24} {state}, {ready} simulated nodes Ready ({k.selector})")
        raise SystemExit(0 if pid else 1)
    else:
        k.output(args.namespace, args.text)


if __name__ == "__main__":
    main()
