"""The operator's logs are kopf's (`kopf.configure`): with --json-logs one JSON object per line,
with the message, time, severity, the object a kopf record is about and the logger's name; no
formatter of planops' own. Run in a subprocess: logging is process-wide."""

from __future__ import annotations

import json
import subprocess
import sys

CODE = """
import logging
from planops.handlers.kopf_adapter import kopf
from planops.handlers.kopf_adapter import configure_logging
configure_logging(json_logs={json_logs}, verbose=False)
logging.getLogger("planops.trace").info('{{"record": "plan_start", "plan": "p"}}')
body = {{"apiVersion": "planops.dev/v1alpha1", "kind": "Plan",
        "metadata": {{"name": "p", "namespace": "ns", "uid": "u-1"}}}}
kopf.LocalObjectLogger(body=body, settings=kopf.OperatorSettings()).warning("about p")
logging.getLogger("kopf.objects").info("not shown: kopf's per-handler lines are quiet")
try:
    1 / 0
except ZeroDivisionError:
    logging.getLogger("planops.handlers").exception("a bug")
"""


def logs(json_logs: bool) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", CODE.format(json_logs=json_logs)],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stderr.splitlines()


def test_json_logs_are_one_object_per_line_with_the_logger_and_the_object():
    lines = [json.loads(line) for line in logs(json_logs=True)]
    trace, about, bug = lines
    assert trace["logger"] == "planops.trace" and trace["severity"] == "info"
    assert json.loads(trace["message"]) == {"record": "plan_start", "plan": "p"}
    assert trace["timestamp"]
    assert about["message"] == "about p" and about["severity"] == "warn"
    assert about["object"]["name"] == "p" and about["object"]["namespace"] == "ns"
    assert bug["severity"] == "error" and "ZeroDivisionError" in bug["exc_info"]


def test_text_logs_are_kopfs_lines():
    lines = logs(json_logs=False)
    assert "planops.trace" in lines[0] and "[INFO" in lines[0]
    assert "about p" in lines[1]
    assert not any("not shown" in line for line in lines)
