"""Which repository a run uses and whose credentials (planops.store.repositories): a Capsule
may name a credentials Secret only when that Secret lists the Capsule's namespace."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from planops.api.artifact_models import ArtifactRepository
from planops.store.repositories import (
    ANNOTATION_NAMESPACES,
    RepositoryError,
    choose,
    credentials,
    default_from_flag,
)

REPO = ArtifactRepository.model_validate(
    {"endpoint": "https://s3.example.com", "bucket": "arts", "credentialsSecret": {"name": "c"}}
)


def secret(annotation: str | None = None, **data: str) -> dict[str, Any]:
    meta = {"annotations": {ANNOTATION_NAMESPACES: annotation}} if annotation else {}
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"metadata": meta, "data": encoded}


GOOD = {"accessKeyId": "AK", "secretAccessKey": "SK\n"}


def test_the_capsule_wins_over_the_default() -> None:
    other = REPO.model_copy(update={"bucket": "other"})
    chosen = choose(other, REPO, "team-a", "safe")
    assert chosen is not None and chosen.spec.bucket == "other" and chosen.from_capsule
    chosen = choose(None, REPO, "team-a", "safe")
    assert chosen is not None and not chosen.from_capsule
    assert choose(None, None, "team-a", "safe") is None


def test_the_default_needs_no_annotation() -> None:
    chosen = choose(None, REPO, "team-a", "safe")
    assert chosen is not None
    assert credentials(chosen, secret(**GOOD), "planops", "team-a") == ("AK", "SK")


@pytest.mark.parametrize("listed", ["team-a", "team-b, team-a", "team-*", "*"])
def test_a_capsule_uses_a_secret_that_lists_its_namespace(listed: str) -> None:
    chosen = choose(REPO, None, "team-a", "safe")
    assert chosen is not None
    assert credentials(chosen, secret(listed, **GOOD), "planops", "team-a") == ("AK", "SK")


@pytest.mark.parametrize(
    ("got", "says"),
    [
        (None, "is missing or the operator may not read it"),
        (secret(**GOOD), "does not list namespace team-a"),
        (secret("team-b", **GOOD), "does not list namespace team-a"),
        (secret("team-a", accessKeyId="AK"), "has no key 'secretAccessKey'"),
        (
            {
                "metadata": {"annotations": {ANNOTATION_NAMESPACES: "team-a"}},
                "data": {"accessKeyId": "!!", "secretAccessKey": "x"},
            },
            "is not base64",
        ),
    ],
)
def test_refusals_name_the_repository(got: dict[str, Any] | None, says: str) -> None:
    chosen = choose(REPO, None, "team-a", "safe")
    assert chosen is not None
    with pytest.raises(RepositoryError) as e:
        credentials(chosen, got, "planops", "team-a")
    text = str(e.value)
    assert says in text
    assert "Capsule team-a/safe" in text and "https://s3.example.com" in text
    assert "Secret planops/c" in text


def test_the_default_from_the_charts_json() -> None:
    text = (
        '{"endpoint": "https://s3.x", "bucket": "bkt", "caSecret": "", "keyPrefix": "",'
        ' "credentialsSecret": {"name": "c"}, "artifactGC": {"strategy": "Never"}}'
    )
    got = default_from_flag(text)
    assert got is not None and got.ca_secret is None and got.artifact_gc.strategy == "Never"
    assert default_from_flag(None) is None
    with pytest.raises(RepositoryError):
        default_from_flag("[]")
