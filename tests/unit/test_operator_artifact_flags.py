"""The operator's artifact repository flags (planops.main): the chart's JSON read with the
repository model, every reason of a bad one at once, and the secrets' namespace."""

from __future__ import annotations

import json
from typing import Any

import pytest

from planops import main as main_
from planops.handlers.config import CONFIG

GOOD = {
    "endpoint": "https://s3.example.com",
    "bucket": "arts",
    "caSecret": "",
    "credentialsSecret": {"name": "c"},
}


def _run(*argv: str) -> None:
    main_.main(list(argv), run=lambda *a, **k: None)


def test_the_default_repository_and_its_secrets_namespace(monkeypatch: Any) -> None:
    monkeypatch.setattr(CONFIG, "artifact_repository", None)
    monkeypatch.setattr(CONFIG, "artifact_secrets_namespace", None)
    _run("--artifact-repository", json.dumps(GOOD), "--artifact-secrets-namespace", "ops")
    assert CONFIG.artifact_repository is not None
    assert CONFIG.artifact_repository.bucket == "arts"
    assert CONFIG.artifact_secrets_namespace == "ops"


def test_a_bad_repository_is_refused_with_every_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = {**GOOD, "endpoint": "http://s3", "bucket": "B"}
    with pytest.raises(SystemExit):
        _run("--artifact-repository", json.dumps(bad))
    err = capsys.readouterr().err
    assert "--artifact-repository" in err and "bucket" in err and "pattern" in err
