"""Pure: which repository a run uses and with which credentials. The Capsule's
`spec.artifactRepository` if it has one, else the operator's default (the chart's
`artifactRepository`); the credentials from a Secret in the operator's own namespace, which a
Capsule's repository may use only when the Secret lists the Capsule's namespace in its
annotation `planops.dev/artifact-namespaces` (docs/security.md, "Artifact repository").

The reads (the Secret through the API) are the caller's: this module judges what they gave, so
the operator, the webhook and the CLI's checks agree.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planops.api.artifact_models import ArtifactRepository
from planops.api.names import GROUP

#: on a credentials Secret: the namespaces (names or globs, comma-separated) whose Capsules may
#: name it; the default repository's Secret needs none (the operator's admin chose it for all)
ANNOTATION_NAMESPACES = f"{GROUP}/artifact-namespaces"


class RepositoryError(ValueError):
    """The repository cannot be used; the message names it and says why."""


@dataclass(frozen=True)
class Chosen:
    """The repository a run uses, and whose it is (for messages): `capsule` or `default`."""

    spec: ArtifactRepository
    source: str  # "Capsule team-a/safe" or "the operator's default"
    from_capsule: bool


def default_from_flag(text: str | None) -> ArtifactRepository | None:
    """The operator's default repository from `--artifact-repository` (the chart's values as
    JSON: empty optional strings are unset)."""
    if not text:
        return None
    data = json.loads(text)
    if not isinstance(data, dict):
        raise RepositoryError("--artifact-repository: a JSON object")
    for empty in ("caSecret", "keyPrefix"):
        if data.get(empty) == "":
            data.pop(empty)
    return ArtifactRepository.model_validate(data)


def choose(
    capsule_repo: ArtifactRepository | None,
    default: ArtifactRepository | None,
    namespace: str,
    capsule: str,
) -> Chosen | None:
    """The Capsule's repository, else the default; None: the run stores nothing."""
    if capsule_repo is not None:
        return Chosen(capsule_repo, f"Capsule {namespace}/{capsule}", from_capsule=True)
    if default is not None:
        return Chosen(default, "the operator's default", from_capsule=False)
    return None


def credentials(
    chosen: Chosen, secret: Mapping[str, Any] | None, secrets_namespace: str, namespace: str
) -> tuple[str, str]:
    """The access key and secret key from the Secret `secret` (as the API gives it, or None
    when it is missing or not readable): refused, with the repository named, when the Secret
    is missing, lacks a key, or (a Capsule's repository) does not list `namespace`."""
    ref = chosen.spec.credentials_secret
    where = f"Secret {secrets_namespace}/{ref.name}"
    spec = chosen.spec
    what = f"artifact repository of {chosen.source} ({spec.endpoint}, bucket {spec.bucket})"
    if secret is None:
        raise RepositoryError(f"{what}: {where} is missing or the operator may not read it")
    if chosen.from_capsule:
        annotations = (secret.get("metadata") or {}).get("annotations") or {}
        allowed = [p.strip() for p in annotations.get(ANNOTATION_NAMESPACES, "").split(",")]
        if not any(p and fnmatch.fnmatchcase(namespace, p) for p in allowed):
            raise RepositoryError(
                f"{what}: {where} does not list namespace {namespace} in its annotation "
                f"{ANNOTATION_NAMESPACES}"
            )
    data = secret.get("data") or {}
    got = []
    for key in (ref.access_key_id_key, ref.secret_access_key_key):
        if key not in data:
            raise RepositoryError(f"{what}: {where} has no key {key!r}")
        try:
            got.append(base64.b64decode(data[key], validate=True).decode().strip())
        except (binascii.Error, UnicodeDecodeError, TypeError) as e:
            raise RepositoryError(f"{what}: {where} key {key!r} is not base64 text") from e
    return got[0], got[1]
