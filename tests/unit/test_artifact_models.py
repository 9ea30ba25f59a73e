"""The artifact repository's model (api.artifact_models): a Capsule's or the chart's
`artifactRepository`, and every refusal of a bad one, all at once with its field path."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from planops.api.artifact_models import ArtifactRepository
from planops.api.capsule_models import CapsuleSpec

GOOD: dict[str, Any] = {
    "endpoint": "https://s3.example.com:9000",
    "bucket": "planops-artifacts",
    "keyPrefix": "team/runs",
    "credentialsSecret": {"name": "s3-creds"},
}


def test_a_good_repository_and_its_defaults() -> None:
    repo = ArtifactRepository.model_validate(GOOD)
    assert repo.region == "us-east-1"
    assert repo.credentials_secret.access_key_id_key == "accessKeyId"
    assert repo.credentials_secret.secret_access_key_key == "secretAccessKey"
    assert repo.artifact_gc.strategy == "OnRunDeletion"
    assert not repo.insecure
    capsule = CapsuleSpec.model_validate({"artifactRepository": GOOD})
    assert capsule.artifact_repository == repo


def test_plain_http_with_insecure() -> None:
    repo = ArtifactRepository.model_validate(
        {**GOOD, "endpoint": "http://127.0.0.1:8333/", "insecure": True}
    )
    assert repo.endpoint == "http://127.0.0.1:8333"


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"endpoint": "http://s3.example.com"}, "", "plain http needs insecure"),
        ({"endpoint": "s3.example.com"}, "endpoint", "a URL https://host"),
        ({"endpoint": "https://user:pw@s3.example.com"}, "endpoint", "a URL https://host"),
        ({"endpoint": "https://s3.example.com/bucket"}, "endpoint", "a URL https://host"),
        ({"endpoint": "https://s3.example.com:0"}, "endpoint", "port 0"),
        ({"endpoint": "https://a..b"}, "endpoint", "not a host name"),
        ({"bucket": "Bad_Bucket"}, "bucket", "pattern"),
        ({"keyPrefix": "a/../b"}, "keyPrefix", "none of them '..'"),
        ({"keyPrefix": "/abs"}, "keyPrefix", "no leading"),
        ({"region": "US East"}, "region", "pattern"),
        ({"credentialsSecret": {}}, "credentialsSecret.name", "required"),
        ({"credentialsSecret": {"name": "x", "accessKeyIdKey": "a/b"}}, "accessKeyIdKey", ""),
        ({"artifactGC": {"strategy": "Sometimes"}}, "artifactGC.strategy", "OnRunDeletion"),
        ({"caSecret": "ca", "endpoint": "http://h", "insecure": True}, "", "needs an https"),
        ({"accessKey": "AKIA..."}, "accessKey", "Extra inputs"),
    ],
)
def test_refusals_name_the_field(change: dict[str, Any], field: str, says: str) -> None:
    with pytest.raises(ValidationError) as got:
        ArtifactRepository.model_validate({**GOOD, **change})
    text = str(got.value)
    assert field in text and says in text, text


def test_every_reason_at_once() -> None:
    with pytest.raises(ValidationError) as got:
        ArtifactRepository.model_validate(
            {"endpoint": "ftp://x", "bucket": "B", "credentialsSecret": {"name": "-"}}
        )
    fields = {".".join(str(p) for p in e["loc"]) for e in got.value.errors()}
    assert {"endpoint", "bucket", "credentialsSecret.name"} <= fields
