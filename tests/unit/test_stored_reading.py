"""Reading stored logs and artifacts without credentials (docs/artifacts.md, "Reading logs and
artifacts"): which runs' URLs are due (store.signed), their compact entry and its budget, the
keys a run's records make, the archive row's pointer at each step's log, and the CLI's `logs`
(the pod gone) and `artifacts` / `artifacts get` through a loopback HTTP server standing in for
the store (it serves each object by its path; the URL's signature is the real client's)."""

from __future__ import annotations

import hashlib
import http.server
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

from planops.archive import row as archive_row
from planops.cli.exit_codes import EXIT_CLUSTER, EXIT_INPUT, EXIT_OK
from planops.reconciler.history import run_history
from planops.store import Repository, RunKeys, Store, signed

from .fakekube import FakeKube
from .test_cli_kubectl import run

NOW = 1_800_000_000.0
NS, UID, RUN = "ns", "0a1b2c3d-0000-4000-8000-000000000001", "r1"
BLOB = b"the artifact\n" * 100


class _Objects(http.server.BaseHTTPRequestHandler):
    objects: ClassVar[dict[str, bytes]] = {}

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path.endswith("/moved"):  # a store (or what poses as one) redirecting elsewhere
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
            body = b""
        elif path.endswith("/refused"):
            body = b"<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"
            self.send_response(403)
        elif path in self.objects:
            body = self.objects[path]
            self.send_response(200)
        else:
            body = b"<Error><Code>NoSuchKey</Code></Error>"
            self.send_response(404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def store_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Objects)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _store(endpoint: str = "http://127.0.0.1:9") -> Store:
    return Store(Repository("t", endpoint, "bkt", "AKID", "SECRET", key_prefix="pre"))


def _entry(store: Store, rels: list[str], at: datetime | None = None, records: int = 1) -> dict:
    at = at or datetime.fromtimestamp(NOW, UTC)
    keys = RunKeys("pre", NS, UID, RUN)
    life = timedelta(days=7)
    urls = {r: store.presign_get(keys.run_prefix + r, life, at) for r in rels}
    return signed.compact(
        RUN,
        urls,
        repository=store.repo.describe(),
        key_prefix="pre",
        records=records,
        expires_at=at.timestamp() + life.total_seconds(),
    )


def _status(records: list[dict[str, Any]], stored: list[dict[str, Any]] | None = None) -> dict:
    out: dict[str, Any] = {
        "phase": "Succeeded",
        "run": {"id": RUN},
        "report": {"records": len(records), "steps": records},
    }
    if stored is not None:
        out["stored"] = stored
    return out


ART_KEY = f"{NS}/{UID}/{RUN}/build/artifacts/bundle"
RECORD = {
    "stepId": "build",
    "status": "success",
    "attempts": 2,
    "finishedAt": "2027-01-15T08:00:00Z",
    "artifacts": [
        {
            "name": "bundle",
            "key": ART_KEY,
            "sha256": hashlib.sha256(BLOB).hexdigest(),
            "size": len(BLOB),
        }
    ],
}


# -- what is due, what an entry holds ---------------------------------------------------------


def test_due_signs_a_new_or_grown_run_and_any_kept_run_near_its_expiry() -> None:
    store = _store()
    assert signed.due(_status([RECORD]), NOW) == [RUN]  # no entry yet
    fresh = _entry(store, ["build/logs/1.log"])
    assert signed.due(_status([RECORD], [fresh]), NOW) == []
    assert signed.due(_status([RECORD, RECORD], [fresh]), NOW) == [RUN]  # a record settled
    six_days = NOW + 6 * 86400 + 1  # within a day of the 7-day expiry
    assert signed.due(_status([RECORD], [fresh]), six_days) == [RUN]
    earlier = {**fresh, "run": "r0", "records": None}
    status = {**_status([RECORD], [fresh, earlier]), "history": [{"id": "r0"}]}
    assert signed.due(status, six_days) == [RUN, "r0"]
    gone = {**_status([RECORD], [fresh, earlier])}  # r0 no longer kept: never signed again
    assert signed.due(gone, six_days) == [RUN]


def test_an_entry_is_compact_and_gives_back_each_url_exactly() -> None:
    store = _store()
    rels = ["build/logs/1.log", "build/logs/2.log", "build/artifacts/bundle"]
    keys = RunKeys("pre", NS, UID, RUN)
    at = datetime.fromtimestamp(NOW, UTC)
    e = _entry(store, rels, at)
    assert set(e["signatures"]) == set(rels) and "urls" not in e
    for r in rels:
        assert signed.url(e, r) == store.presign_get(keys.run_prefix + r, timedelta(days=7), at)
    assert len(repr(e)) < 1200  # three ~500-byte URLs would be 1500+
    odd = signed.compact(
        RUN,
        {"a/logs/1.log": "https://elsewhere/x?sig=1"},
        repository="r",
        key_prefix="",
        records=None,
        expires_at=NOW,
    )
    assert signed.url(odd, "a/logs/1.log") == "https://elsewhere/x?sig=1"  # kept whole


def test_a_runs_keys_are_its_logs_per_attempt_and_its_own_artifacts_only() -> None:
    foreign = {"name": "x", "key": f"{NS}/other-uid/{RUN}/s/artifacts/x", "sha256": "", "size": 1}
    records = [RECORD, {"stepId": "s", "attempts": 1, "artifacts": [foreign]}]
    got = signed.keys_of_records(records, signed.relative_run_keys(NS, UID, RUN))
    assert got == ("build/logs/1.log", "build/logs/2.log", "build/artifacts/bundle", "s/logs/1.log")
    bad = [{"stepId": "../x", "attempts": 1}]
    assert signed.keys_of_records(bad, signed.relative_run_keys(NS, UID, RUN)) == ()


def test_written_keeps_kept_runs_current_first_within_the_budget() -> None:
    store = _store()
    big = _entry(store, [f"s{i}/logs/1.log" for i in range(600)])
    old = {**big, "run": "r0"}
    status = {**_status([RECORD]), "history": [{"id": "r0"}]}
    out = signed.written(status, [big, old])
    assert out is not None and [e["run"] for e in out["stored"]] == [RUN]  # r0 past the budget
    assert signed.written(out, []) is None  # nothing changes: nothing to write
    small = _entry(store, ["build/logs/1.log"])
    both = signed.written(status, [small, {**small, "run": "r0"}, {**small, "run": "gone"}])
    assert both is not None and [e["run"] for e in both["stored"]] == [RUN, "r0"]


def test_every_status_write_carries_the_reading_urls_on() -> None:
    previous = {"stored": [{"run": RUN}], "history": None}
    assert run_history.carried({"phase": "Running"}, previous)["stored"] == [{"run": RUN}]


def test_the_archive_row_points_at_each_steps_stored_log() -> None:
    e = _entry(_store(), ["build/logs/1.log"])
    plan = {
        "metadata": {"name": "p", "namespace": NS, "uid": UID},
        "status": {**_status([RECORD], [e]), "startedAt": None, "finishedAt": None},
    }
    r = archive_row.row(plan)
    prefix = f"pre/{NS}/{UID}/{RUN}/build/logs/"
    assert r.stored_logs == {
        "repository": _store().repo.describe(),
        "keys": {"build": [prefix + "1.log", prefix + "2.log"]},
    }
    plan["status"].pop("stored")
    assert archive_row.row(plan).stored_logs is None


def test_the_migration_adds_the_column_to_an_existing_table() -> None:
    from planops.archive.store import migrations  # noqa: PLC0415

    last = migrations()[-1]
    assert last.version == 2 and "ADD COLUMN IF NOT EXISTS stored_logs jsonb" in last.sql


# -- the CLI ----------------------------------------------------------------------------------


def _plan(endpoint: str, records: list[dict[str, Any]], rels: list[str], at: datetime) -> dict:
    e = _entry(_store(endpoint), rels, at, records=len(records))
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "p", "namespace": NS, "uid": UID},
        "spec": {"steps": [{"id": "build", "shell": "true"}]},
        "status": _status(records, [e]),
    }


def _serve(objects: dict[str, bytes]) -> None:
    _Objects.objects = {f"/bkt/pre/{NS}/{UID}/{RUN}/{k}": v for k, v in objects.items()}


def _now() -> datetime:
    return datetime.fromtimestamp(time.time(), UTC).replace(microsecond=0)


def test_logs_reads_the_stored_log_once_the_pod_is_gone(
    store_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = FakeKube()
    kube.put(
        "plan", _plan(store_server, [RECORD], ["build/logs/1.log", "build/logs/2.log"], _now())
    )
    _serve({"build/logs/2.log": b"line 1\nline 2\nline 3\n", "build/logs/1.log": b"first\n"})
    code, out, err = run(kube, capsys, "logs", "p", "build")
    assert code == EXIT_OK and out == "line 1\nline 2\nline 3\n", err
    assert "attempt 2's log from the artifact repository" in err
    assert run(kube, capsys, "logs", "p", "build", "--attempt", "1")[1] == "first\n"
    assert run(kube, capsys, "logs", "p", "build", "--tail", "1")[1] == "line 3\n"


def test_logs_says_why_a_stored_log_cannot_be_read_and_shows_the_record(
    store_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = FakeKube()
    recorded = {**RECORD, "output": "capped"}
    kube.put("plan", _plan(store_server, [recorded], ["build/logs/2.log"], _now()))
    _serve({})
    code, out, err = run(kube, capsys, "logs", "p", "build")
    assert code == EXIT_OK and out == "capped\n"
    assert "the store does not hold it" in err and "output recorded in the report" in err


def test_an_expired_url_says_how_a_fresh_one_comes(
    store_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = FakeKube()
    long_ago = _now() - timedelta(days=8)
    kube.put("plan", _plan(store_server, [RECORD], ["build/artifacts/bundle"], long_ago))
    code, _, err = run(kube, capsys, "artifacts", "get", "p", "build", "bundle", "-o", "/tmp/x")
    assert code == EXIT_CLUSTER
    assert "expired at" in err and "resync" in err and "run this again" in err


def test_a_url_the_store_refuses_says_its_code_or_that_it_expired(store_server: str) -> None:
    from planops.cli import stored  # noqa: PLC0415

    e = _entry(_store(store_server), ["a/logs/refused"], _now())
    url = signed.url(e, "a/logs/refused")
    assert url is not None
    with pytest.raises(stored.ReadError, match="answered 403 AccessDenied"):
        stored.read(url, "the log", lambda _: None)
    skewed = _entry(_store(store_server), ["a/logs/refused"], _now() - timedelta(days=7))
    late = signed.url(skewed, "a/logs/refused")
    assert late is not None
    with pytest.raises(stored.ReadError, match="expired at"):  # the store's clock is ahead
        stored.read(late, "the log", lambda _: None, now=time.time() - 200)


def test_artifacts_lists_a_runs_artifacts(
    store_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = FakeKube()
    kube.put("plan", _plan(store_server, [RECORD], [], _now()))
    code, out, _ = run(kube, capsys, "artifacts", "p")
    assert code == EXIT_OK
    assert out.split("\n")[0].split() == ["STEP", "NAME", "SIZE", "SHA256", "DIRECTORY"]
    sha = hashlib.sha256(BLOB).hexdigest()
    assert out.split("\n")[1].split() == ["build", "bundle", str(len(BLOB)), sha, "no"]
    code, out, _ = run(kube, capsys, "artifacts", "p", "-o", "json")
    assert '"name": "bundle"' in out
    code, _, err = run(kube, capsys, "artifacts", "p", "--run", "r9")
    assert code == EXIT_INPUT and "keeps no run 'r9'" in err


def test_artifacts_get_checks_the_sha256_and_renames_into_place(
    store_server: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kube = FakeKube()
    kube.put("plan", _plan(store_server, [RECORD], ["build/artifacts/bundle"], _now()))
    _serve({"build/artifacts/bundle": BLOB})
    to = tmp_path / "out.bin"
    code, _, err = run(kube, capsys, "artifacts", "get", "p", "build", "bundle", "-o", str(to))
    assert code == EXIT_OK and to.read_bytes() == BLOB and "sha256 checked" in err
    _serve({"build/artifacts/bundle": BLOB.replace(b"the", b"THE")})  # replaced in the store
    to2 = tmp_path / "out2.bin"
    code, _, err = run(kube, capsys, "artifacts", "get", "p", "build", "bundle", "-o", str(to2))
    assert code == EXIT_CLUSTER and "is not the record's" in err
    assert not to2.exists() and list(tmp_path.iterdir()) == [to]  # no temporary file left


def test_artifacts_get_refuses_unknown_names_with_a_suggestion(
    store_server: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kube = FakeKube()
    kube.put("plan", _plan(store_server, [RECORD], ["build/artifacts/bundle"], _now()))
    to = str(tmp_path / "x")
    code, _, err = run(kube, capsys, "artifacts", "get", "p", "biuld", "bundle", "-o", to)
    assert code == EXIT_INPUT and "did you mean 'build'" in err
    code, _, err = run(kube, capsys, "artifacts", "get", "p", "build", "bundel", "-o", to)
    assert code == EXIT_INPUT and "did you mean 'bundle'" in err
    plain = _plan(store_server, [RECORD], [], _now())
    plain["status"].pop("stored")
    kube.put("plan", plain)
    code, _, err = run(kube, capsys, "artifacts", "get", "p", "build", "bundle", "-o", to)
    assert code == EXIT_INPUT and "no artifact repository is configured" in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["artifacts", "get", "p", "build"], "artifacts get NAME STEP ARTIFACT -o PATH"),
        (["artifacts", "get", "p", "build", "bundle"], "-o PATH"),
        (["artifacts", "p", "extra"], "artifacts NAME [--run ID]"),
        (["artifacts", "p", "-o", "wide"], "one of table, json, yaml"),
    ],
)
def test_artifacts_words_and_flags_are_checked_before_the_cluster(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(FakeKube(), capsys, *argv)
    assert code == EXIT_INPUT and said in err


# -- the operator's signer --------------------------------------------------------------------


def _signer_cluster() -> tuple[FakeKube, Any]:
    import base64  # noqa: PLC0415

    from planops.api.artifact_models import ArtifactRepository  # noqa: PLC0415
    from planops.reconciler import Signer, StatusWriter, StoredLogs  # noqa: PLC0415

    kube = FakeKube()
    b64 = {k: base64.b64encode(v.encode()).decode() for k, v in (("a", "AKID"), ("s", "SECRET"))}
    kube.put(
        "secret",
        {
            "metadata": {"name": "creds", "namespace": "sys"},
            "data": {"accessKeyId": b64["a"], "secretAccessKey": b64["s"]},
        },
    )
    repo = ArtifactRepository.model_validate(
        {
            "endpoint": "http://store.example:8333",
            "bucket": "bkt",
            "insecure": True,
            "keyPrefix": "pre",
            "credentialsSecret": {"name": "creds"},
        }
    )
    signer = Signer(StoredLogs(kube, repo, "sys"), StatusWriter(kube), clock=lambda: NOW)
    return kube, signer


def test_the_signer_writes_each_runs_urls_and_signs_again_only_when_due() -> None:
    import asyncio  # noqa: PLC0415

    kube, signer = _signer_cluster()
    plan = kube.put(
        "plan",
        {
            "metadata": {"name": "p", "namespace": NS, "uid": UID},
            "spec": {"steps": [{"id": "build", "shell": "true"}]},
            "status": _status([RECORD]),
        },
    )
    written = asyncio.run(signer.sign(plan))
    assert written is not None
    (e,) = written["status"]["stored"]
    assert e["run"] == RUN and e["records"] == 1 and e["keyPrefix"] == "pre"
    assert set(e["signatures"]) == {
        "build/logs/1.log",
        "build/logs/2.log",
        "build/artifacts/bundle",
    }
    url = signed.url(e, "build/logs/2.log")
    base = f"http://store.example:8333/bkt/pre/{NS}/{UID}/{RUN}/"
    assert url is not None and url.startswith(base)
    assert "SECRET" not in repr(written["status"])  # a signature, never the credential
    assert asyncio.run(signer.sign(written)) is None  # nothing due: nothing written


def test_the_ui_reads_the_stored_log_through_the_users_plan(store_server: str) -> None:
    import asyncio  # noqa: PLC0415

    from planops.cli.ui import handlers  # noqa: PLC0415

    kube = FakeKube()
    kube.put("plan", _plan(store_server, [RECORD], ["build/logs/2.log"], _now()))
    _serve({"build/logs/2.log": b"all of it\n"})
    got = asyncio.run(handlers.stored_log(kube, NS, "p", "build", None))
    assert got is not None and got["source"] == "store" and got["text"] == "all of it\n"
    assert "attempt 2" in got["note"]
    assert asyncio.run(handlers.stored_log(kube, NS, "other", "build", None)) is None
    _serve({})
    missing = asyncio.run(handlers.stored_log(kube, NS, "p", "build", None))
    assert missing is not None and missing["text"] == "" and "does not hold it" in missing["note"]


def test_a_redirect_is_not_followed(store_server: str) -> None:
    # a signed URL names one object; following a redirect would lead the reader (the UI server
    # inside the cluster too) wherever the endpoint's answer points
    from planops.cli import stored  # noqa: PLC0415

    _Objects.objects["/elsewhere"] = b"internal"
    e = _entry(_store(store_server), ["a/logs/moved"], _now())
    url = signed.url(e, "a/logs/moved")
    assert url is not None
    got: list[bytes] = []
    with pytest.raises(stored.ReadError, match="answered 302"):
        stored.read(url, "the log", got.append)
    assert got == []


# -- a big run: its entry bounded ---------------------------------------------------------------


def test_a_big_runs_entry_is_bounded_and_once_full_signed_again_only_as_it_expires() -> None:
    import asyncio  # noqa: PLC0415

    # 5,000 steps' logs: ~470 KiB of signatures, more than the Plan has room for
    records = [{"stepId": f"step-{i:04}", "status": "success", "attempts": 1} for i in range(5000)]
    kube, signer = _signer_cluster()
    plan = kube.put(
        "plan",
        {
            "metadata": {"name": "p", "namespace": NS, "uid": UID},
            "spec": {"steps": [{"id": "build", "shell": "true"}]},
            "status": _status(records),
        },
    )
    written = asyncio.run(signer.sign(plan))
    assert written is not None
    (e,) = written["status"]["stored"]
    held = signed.signed_keys(e)
    assert len(repr(e)) <= signed.ENTRY_BUDGET_BYTES + 1024
    assert 500 < len(held) < 5000 and e["unsigned"] == 5000 - len(held)
    assert held == tuple(f"step-{i:04}/logs/1.log" for i in range(len(held)))  # in record order
    # a full entry takes no more: a settled record does not sign it again (a big run's 20,000
    # signings, each listing its report), its expiry does
    grown = {**written["status"], "report": {"records": 5001, "steps": [*records, records[0]]}}
    assert signed.due(grown, NOW) == []
    assert signed.due(grown, NOW + 6 * 86400 + 1) == [RUN]
    # a new run: the full entry is past status.stored's bound for earlier runs, left out
    earlier = {
        **written["status"],
        "run": {"id": "r2"},
        "report": {"records": 0, "steps": []},
        "history": [{"id": RUN}],
    }
    again = asyncio.run(signer.sign(kube.put("plan", {**written, "status": earlier})))
    assert again is not None
    assert [x["run"] for x in again["status"]["stored"]] == ["r2"]


def test_an_entry_kept_whole_counts_its_urls_against_the_bound() -> None:
    url = "https://elsewhere/x?" + "q" * 600
    odd = signed.compact(
        RUN,
        {f"s{i}/logs/1.log": url for i in range(1000)},
        repository="r",
        key_prefix="",
        records=None,
        expires_at=NOW,
        unsigned=3,
    )
    assert len(repr(odd)) <= signed.ENTRY_BUDGET_BYTES + 1024
    assert odd["unsigned"] == 3 + 1000 - len(odd["urls"])
    assert signed.budgeted(("a", "b")) == (("a", "b"), 0)
    many = tuple(f"step-{i:04}/logs/1.log" for i in range(5000))
    kept, left = signed.budgeted(many)  # chosen before signing: the rest cost no signature
    assert kept == many[: len(kept)] and left == 5000 - len(kept) > 0


def test_logs_says_when_a_big_runs_log_has_no_url_and_shows_the_record(
    store_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = FakeKube()
    late = {"stepId": "late", "status": "failed", "attempts": 1, "output": "recorded"}
    plan = _plan(store_server, [RECORD, late], ["build/logs/2.log"], _now())
    plan["status"]["stored"][0]["unsigned"] = 1
    kube.put("plan", plan)
    _serve({})
    code, out, err = run(kube, capsys, "logs", "p", "late")
    assert code == EXIT_OK and out == "recorded\n"
    assert "no reading URL for the stored log of late" in err and "1 left unsigned" in err
    art = {**RECORD, "stepId": "late"}
    plan["status"]["report"]["steps"] = [RECORD, art]
    kube.put("plan", plan)
    code, _, err = run(kube, capsys, "artifacts", "get", "p", "late", "bundle", "-o", "/tmp/x")
    assert code == EXIT_INPUT and "1 left unsigned" in err, err
