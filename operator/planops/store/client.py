"""The one surface planops talks to an S3-compatible artifact repository through (AWS S3,
SeaweedFS, GCS in S3 mode, a MinIO server): put and get (files, streams, bytes), list and delete
beneath a prefix, head, and presigned GET/PUT URLs with an expiry.

It is the Apache-2.0 `minio` Python client underneath, chosen over boto3 by measured cost
(docs/artifacts.md, "The client"); no other module imports it. Kube-free: the caller hands it a
`Repository` (where and who), read from the chart's values or a Capsule and its Secret by the
operator.

Every request is bounded: a connect timeout, a read timeout and two retries of a 5xx or a refused
connection, so a store that is down fails a call with a clear `StoreError` naming the repository
within about a minute, never hangs it. Calls are blocking (urllib3): asyncio callers run them in
a thread (store.background).
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

import urllib3
from minio import Minio
from minio.deleteobjects import DeleteObject
from minio.error import InvalidResponseError, S3Error, ServerError

#: the user metadata key holding an object's SHA-256 (x-amz-meta-sha256)
SHA256_META = "sha256"
#: a presigned URL's longest life (SigV4's own bound is 7 days)
MAX_EXPIRY = timedelta(days=7)
#: the S3 answers that mean the credentials are wrong, not the request
CREDENTIAL_CODES = frozenset(
    {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken"}
)
_CHUNK = 1 << 20


class StoreError(Exception):
    """A request to the repository failed; the message names the repository and the key."""

    def __init__(self, repository: str, what: str, why: str, *, credentials: bool = False) -> None:
        super().__init__(f"artifact repository {repository}: {what}: {why}")
        self.repository = repository
        self.credentials = credentials  # the store refused the access key or its signature
        self.missing = why.startswith("NoSuchKey") or why.startswith("NoSuchBucket")


@dataclass(frozen=True)
class Repository:
    """Where the store is and who planops is there. `name` is how errors call it (the Capsule's
    or the chart's repository); `secret_key` never appears in a repr or a message."""

    name: str
    endpoint: str  # https://host[:port] or http://host[:port]
    bucket: str
    access_key: str
    secret_key: str = field(repr=False)
    region: str = "us-east-1"
    key_prefix: str = ""
    ca_file: str | None = None  # a PEM bundle the store's certificate chains to
    insecure_skip_verify: bool = False
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    retries: int = 2

    @property
    def secure(self) -> bool:
        return self.endpoint.startswith("https://")

    @property
    def host(self) -> str:
        return self.endpoint.split("://", 1)[-1].rstrip("/")

    def describe(self) -> str:
        return f"{self.name} ({self.endpoint}, bucket {self.bucket})"


@dataclass(frozen=True)
class Stored:
    """What a put left: the key, its size, its SHA-256 (hex) and the store's ETag."""

    key: str
    size: int
    sha256: str
    etag: str


@dataclass(frozen=True)
class Listed:
    """One object beneath a listed prefix."""

    key: str
    size: int
    etag: str
    last_modified: datetime | None


@dataclass(frozen=True)
class Head:
    """An object's size, ETag, SHA-256 (when planops stored it) and metadata."""

    key: str
    size: int
    etag: str
    sha256: str | None
    metadata: dict[str, str]


class _Hashing(io.RawIOBase):
    """A readable stream that hashes and counts what is read through it."""

    def __init__(self, inner: IO[bytes]) -> None:
        self.inner, self.digest, self.size = inner, hashlib.sha256(), 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.inner.read(size)
        self.digest.update(data)
        self.size += len(data)
        return data


class Store:
    """A client of one repository (thread-safe: urllib3's pool)."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        tls: dict[str, Any] = {}
        if repo.secure:
            if repo.insecure_skip_verify:
                tls["cert_reqs"] = "CERT_NONE"
            else:
                tls["cert_reqs"] = "CERT_REQUIRED"
                if repo.ca_file:
                    tls["ca_certs"] = repo.ca_file
        http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=repo.connect_timeout, read=repo.read_timeout),
            retries=urllib3.Retry(
                total=repo.retries,
                connect=repo.retries,
                read=0,  # a read that timed out is not sent again: the caller decides
                backoff_factor=0.3,
                status_forcelist=(500, 502, 503, 504),
                allowed_methods=None,
                raise_on_status=False,
            ),
            maxsize=10,
            **tls,
        )
        self._client = Minio(
            repo.host,
            access_key=repo.access_key,
            secret_key=repo.secret_key,
            secure=repo.secure,
            region=repo.region,  # set: no GetBucketLocation request before the first call
            http_client=http,
            cert_check=not repo.insecure_skip_verify,
        )

    def _fail(self, what: str, e: Exception) -> StoreError:
        if isinstance(e, S3Error):
            return StoreError(
                self.repo.describe(),
                what,
                f"{e.code}: {e.message}",
                credentials=e.code in CREDENTIAL_CODES,
            )
        if isinstance(e, InvalidResponseError | ServerError):
            return StoreError(self.repo.describe(), what, str(e)[:500])
        return StoreError(self.repo.describe(), what, f"{type(e).__name__}: {str(e)[:500]}")

    # -- writes

    def put_stream(
        self, key: str, stream: IO[bytes], length: int = -1, content_type: str | None = None
    ) -> Stored:
        """Uploads what `stream` gives and returns its size and SHA-256. Of unknown length
        (-1) it is spooled to a temporary file first, and the SHA-256 is also the object's
        metadata (as put_file's); of a known length it streams, and only the return has it."""
        if length < 0:
            return self._put_spooled(key, stream, content_type)
        hashing = _Hashing(stream)
        etag = self._put(key, hashing, length, content_type, None)
        return Stored(key, hashing.size, hashing.digest.hexdigest(), etag)

    def _put(
        self,
        key: str,
        data: IO[bytes] | io.RawIOBase,
        length: int,
        content_type: str | None,
        sha256: str | None,
    ) -> str:
        """One PUT (multipart past 5 MiB, minio's choice); the store's ETag."""
        try:
            done = self._client.put_object(
                self.repo.bucket,
                key,
                cast(BinaryIO, data),
                length,
                content_type=content_type or "application/octet-stream",
                metadata={SHA256_META: sha256} if sha256 else None,
            )
        except Exception as e:
            raise self._fail(f"put {key}", e) from e
        return done.etag or ""

    def _put_spooled(self, key: str, stream: IO[bytes], content_type: str | None) -> Stored:
        with tempfile.TemporaryFile() as spool:
            while chunk := stream.read(_CHUNK):
                spool.write(chunk)
            size = spool.tell()
            spool.seek(0)
            return self.put_file(key, spool, size, content_type)

    def put_file(
        self,
        key: str,
        path: str | os.PathLike[str] | IO[bytes],
        size: int | None = None,
        content_type: str | None = None,
    ) -> Stored:
        """Uploads a file (a path or an open binary file), with its SHA-256 as metadata."""
        with _opened(path) as f:
            digest = hashlib.sha256()
            total = 0
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
                total += len(chunk)
            f.seek(0)
            length = total if size is None else size
            etag = self._put(key, f, length, content_type, digest.hexdigest())
        return Stored(key, length, digest.hexdigest(), etag)

    def put_bytes(self, key: str, data: bytes, content_type: str | None = None) -> Stored:
        return self.put_file(key, io.BytesIO(data), len(data), content_type)

    # -- reads

    def get_stream(self, key: str, limit: int | None = None) -> Iterator[bytes]:
        """The object's bytes in chunks (at most `limit` bytes, its head, when given)."""
        try:
            resp = self._client.get_object(
                self.repo.bucket, key, length=limit if limit is not None else 0
            )
        except Exception as e:
            raise self._fail(f"get {key}", e) from e
        try:
            yield from resp.stream(_CHUNK)
        except Exception as e:
            raise self._fail(f"get {key}", e) from e
        finally:
            resp.close()
            resp.release_conn()

    def get_bytes(self, key: str, limit: int | None = None) -> bytes:
        return b"".join(self.get_stream(key, limit))

    def get_file(self, key: str, path: str | os.PathLike[str]) -> int:
        """Downloads to `path` through a temporary file beside it, renamed into place only when
        whole: a failed download leaves nothing half-written at `path`. Returns the size."""
        target = Path(path)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        size = 0
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in self.get_stream(key):
                    out.write(chunk)
                    size += len(chunk)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return size

    def head(self, key: str) -> Head | None:
        """The object's size and metadata; None when there is none at `key`."""
        try:
            got = self._client.stat_object(self.repo.bucket, key)
        except S3Error as e:
            if e.code in ("NoSuchKey", "NoSuchObject", "ResourceNotFound"):
                return None
            raise self._fail(f"head {key}", e) from e
        except Exception as e:
            raise self._fail(f"head {key}", e) from e
        meta = {
            k.lower().removeprefix("x-amz-meta-"): v
            for k, v in (got.metadata or {}).items()
            if k.lower().startswith("x-amz-meta-")
        }
        return Head(key, got.size or 0, got.etag or "", meta.get(SHA256_META), meta)

    def list(self, prefix: str) -> list[Listed]:
        """Every object beneath `prefix` (recursive), in key order."""
        try:
            return [
                Listed(o.object_name or "", o.size or 0, o.etag or "", o.last_modified)
                for o in self._client.list_objects(self.repo.bucket, prefix=prefix, recursive=True)
            ]
        except Exception as e:
            raise self._fail(f"list {prefix}", e) from e

    # -- deletes

    def delete_prefix(self, prefix: str) -> int:
        """Deletes every object beneath `prefix` (which must end in '/': never a bare name's
        siblings); returns how many. Idempotent: nothing there deletes nothing."""
        if not prefix.endswith("/"):
            raise ValueError(f"delete_prefix needs a prefix ending in '/': {prefix!r}")
        keys = [o.key for o in self.list(prefix)]
        self.delete(keys)
        return len(keys)

    def delete(self, keys: Iterable[str]) -> None:
        objects = [DeleteObject(k) for k in keys]
        if not objects:
            return
        try:
            # lazy: the errors come as the iterator is read (1000 keys a request)
            errors = list(self._client.remove_objects(self.repo.bucket, objects))
        except Exception as e:
            raise self._fail(f"delete {len(objects)} objects", e) from e
        if errors:
            first = errors[0]
            raise StoreError(
                self.repo.describe(),
                f"delete {first.name}",
                f"{first.code}: {first.message} ({len(errors)} objects not deleted)",
            )

    # -- presigned URLs (no credentials leave the operator: docs/security.md)

    def presign_get(self, key: str, expires: timedelta, at: datetime | None = None) -> str:
        """A URL anyone holding it may GET `key` with until `expires` from now (from `at`, when
        given: URLs signed together share their date, store.signed keeps them compact)."""
        return self._presign("GET", key, expires, at)

    def presign_put(self, key: str, expires: timedelta) -> str:
        """A URL anyone holding it may PUT `key` with (once or more) until `expires`."""
        return self._presign("PUT", key, expires)

    def _presign(
        self, method: str, key: str, expires: timedelta, at: datetime | None = None
    ) -> str:
        if not timedelta(seconds=1) <= expires <= MAX_EXPIRY:
            raise ValueError(f"a presigned URL lives 1s to 7 days, not {expires}")
        try:
            return str(
                self._client.get_presigned_url(
                    method, self.repo.bucket, key, expires=expires, request_date=at
                )
            )
        except Exception as e:
            raise self._fail(f"presign {method} {key}", e) from e

    def check(self) -> None:
        """Raises StoreError when the bucket cannot be reached with these credentials."""
        try:
            found = self._client.bucket_exists(self.repo.bucket)
        except Exception as e:
            raise self._fail("check the bucket", e) from e
        if not found:
            raise StoreError(self.repo.describe(), "check the bucket", "NoSuchBucket")


class _opened:  # noqa: N801 - a context manager used as a function
    """A path opened for reading, or a file object as it is (not closed here)."""

    def __init__(self, src: str | os.PathLike[str] | IO[bytes]) -> None:
        self.src = src
        self.own: IO[bytes] | None = None

    def __enter__(self) -> IO[bytes]:
        if isinstance(self.src, str | os.PathLike):
            self.own = open(self.src, "rb")
            return self.own
        return self.src

    def __exit__(self, *exc: object) -> None:
        if self.own is not None:
            self.own.close()
