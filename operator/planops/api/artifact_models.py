"""Typed model of an artifact repository: the S3-compatible store a Capsule's runs keep their
artifacts and full step logs in (docs/artifacts.md). The chart's `artifactRepository` value has
the same shape (the operator reads it with this model), and a Capsule's
`spec.artifactRepository` overrides it for the runs under that Capsule.

The credentials are never in the model: `credentialsSecret` names a Secret in the operator's
own namespace that only the operator may read (docs/security.md, "Artifact repository"); a
Secret is used for a Capsule's namespace only when it lists that namespace.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from planops.api.base import NAME_PATTERN, Model

#: an S3 bucket name (the AWS rules: 3-63 lower-case letters, digits, dots, dashes)
BUCKET_PATTERN = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
#: a key prefix: segments of [A-Za-z0-9._-] joined by single slashes (store.keys checks `..`)
KEY_PREFIX_PATTERN = (
    r"^([A-Za-z0-9_-][A-Za-z0-9._-]{0,62})(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}){0,7}$"
)
#: a region as S3 endpoints name them (us-east-1, eu-west-3, auto)
REGION_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
#: a Secret's key (a ConfigMap/Secret data key)
SECRET_KEY_PATTERN = r"^[-._a-zA-Z0-9]{1,253}$"
_ENDPOINT = re.compile(r"^(https?)://([A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?/?$")


class CredentialsSecret(Model):
    """The Secret holding the repository's access key and secret key, in the operator's own
    namespace (never a tenant's: a Plan's author and its steps cannot read it)."""

    name: str = Field(pattern=NAME_PATTERN, description="The Secret's name.")
    access_key_id_key: str = Field(
        default="accessKeyId",
        pattern=SECRET_KEY_PATTERN,
        description="The Secret's key holding the access key id. Default accessKeyId.",
    )
    secret_access_key_key: str = Field(
        default="secretAccessKey",
        pattern=SECRET_KEY_PATTERN,
        description="The Secret's key holding the secret access key. Default secretAccessKey.",
    )


class ArtifactGC(Model):
    """When a run's stored objects (artifacts, logs) are deleted."""

    strategy: Literal["OnRunDeletion", "Never"] = Field(
        default="OnRunDeletion",
        description="OnRunDeletion (default): a run's stored objects go when its Plan is "
        "deleted (ttlSecondsAfterFinished, or by a user: the Plan carries a finalizer of "
        "the operator's until they are deleted) or the run is dropped from the Plan's "
        "history (historyLimit), never before the archive holds the run when the archive is on. "
        "Never: kept (the bucket's own lifecycle rules decide).",
    )


class ArtifactRepository(Model):
    """An S3-compatible store (AWS S3, SeaweedFS, a MinIO server, GCS in S3 mode)."""

    endpoint: str = Field(
        max_length=300,
        description="The store's URL: https://host[:port] (http:// only with insecure: true).",
    )
    bucket: str = Field(pattern=BUCKET_PATTERN, description="The bucket (it must exist).")
    key_prefix: str = Field(
        default="",
        max_length=256,
        description="Every key planops writes starts with it (then namespace/plan-uid/run/"
        "step/...). Empty: the bucket's root.",
    )
    region: str = Field(
        default="us-east-1", pattern=REGION_PATTERN, description="The region. Default us-east-1."
    )
    insecure: bool = Field(
        default=False,
        description="Allow a plain-http endpoint (a store on a trusted network only: the "
        "credentials' signatures and the objects travel in clear).",
    )
    ca_secret: str | None = Field(
        default=None,
        pattern=NAME_PATTERN,
        description="A Secret (in the operator's namespace, key ca.crt) with the PEM bundle "
        "the store's TLS certificate chains to. Unset: the system's roots.",
    )
    credentials_secret: CredentialsSecret = Field(
        description="The Secret with the access key and secret key."
    )
    artifact_gc: ArtifactGC = Field(default_factory=ArtifactGC, alias="artifactGC")

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        m = _ENDPOINT.match(value)
        if not m:
            raise ValueError(
                f"endpoint {value!r}: a URL https://host[:port] (or http:// with insecure: "
                "true), with no path, user, query or fragment"
            )
        port = m.group(3)
        if port and not 0 < int(port[1:]) < 65536:
            raise ValueError(f"endpoint {value!r}: port {port[1:]} is not 1-65535")
        host = m.group(2).strip("[]")
        try:
            ipaddress.ip_address(host)
        except ValueError:
            if host.startswith(".") or ".." in host or host.endswith("."):
                raise ValueError(f"endpoint {value!r}: {host!r} is not a host name") from None
        return value.rstrip("/")

    @field_validator("key_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if value and (not re.match(KEY_PREFIX_PATTERN, value) or ".." in value.split("/")):
            raise ValueError(
                f"keyPrefix {value!r}: up to 8 segments of letters, digits, '.', '_', '-' "
                "joined by '/', none of them '..', no leading or trailing '/'"
            )
        return value

    @model_validator(mode="after")
    def _tls(self) -> ArtifactRepository:
        if self.endpoint.startswith("http://") and not self.insecure:
            raise ValueError(
                f"endpoint {self.endpoint!r}: plain http needs insecure: true (credentials' "
                "signatures and objects would travel in clear)"
            )
        if self.endpoint.startswith("http://") and self.ca_secret:
            raise ValueError(f"endpoint {self.endpoint!r}: caSecret needs an https endpoint")
        return self
