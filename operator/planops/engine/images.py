"""Image references and the patterns of an image allowlist (a Capsule's `images`, the operator's
`policy.allowedImages`), matched component by component.

Matching the whole reference as one string with shell wildcards (fnmatch) let `*` cross `/`:
`busybox:*` admitted `busybox:5000/evil/x:latest`, an image from the registry host
`busybox:5000`. Here both sides are parsed first.

**References** follow the Docker reference grammar, `[host[:port]/]path[:tag][@digest]`:

- the first component is a registry host when there is a `/` after it and it contains `.` or
  `:`, is `localhost`, or has an uppercase letter (Docker's rule); otherwise the host is
  `docker.io`, and a one-component Docker Hub path is under `library/`. So `busybox`,
  `library/busybox`, `docker.io/busybox` and `docker.io/library/busybox` are the same
  repository (`index.docker.io` is `docker.io`);
- hosts compare case-insensitively (DNS); repository paths are lowercase (`[a-z0-9]` runs joined
  by `.`, `_`, `__` or dashes), so an uppercase path is not a reference at all;
- a reference with neither tag nor digest means tag `latest`;
- anything else (empty, spaces, `a//b`, a bad digest, more than 255 characters of name) is not a
  reference and is allowed by no pattern.

**Patterns** are references whose components may hold wildcards:

- `*` matches any run of characters within one component (never a `/`), `?` one character;
- `**` as a whole component matches any number of components (none included); a pattern that
  starts with `**/` spans registries (`**/busybox:*`: busybox from any registry, any depth);
- `*` alone (and `**` alone) matches every reference: the operator's default allowlist `["*"]`;
- a pattern is normalized like a reference: `busybox:*` is `docker.io/library/busybox:*`, and
  `team/*` is `docker.io/team/*` (use `registry.example.com/team/*` for another registry);
- **no tag and no digest** (`registry.example.com/app`): the repository at any tag or digest.
  Allowing a repository is what an allowlist entry means to most platform engineers (Kyverno
  and Gatekeeper users write `repo:*` or `repo*` for it; here the plain name says it); pin a
  version with a tag pattern;
- **a tag** (`app:1.*`, `app:*`): the image's tag must match (an image without tag or digest has
  tag `latest`; a digest-only image has no tag and does not match a tag pattern), and the image
  may carry **no digest**: `app:1.36@sha256:…` is pulled by its digest, the tag ignored, so a
  tag pattern would admit any image of the repository behind an allowed tag;
- **a digest** (`app@sha256:4a1f…`, `app@sha256:*`, `app@*`): the image's digest must match,
  exactly or by wildcards; a tag alongside it in the pattern must match too. A digest is
  admitted only by a digest pattern (or by a pattern naming the repository alone, or `*`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

DEFAULT_HOST = "docker.io"
_LEGACY_HOST = "index.docker.io"
_OFFICIAL = "library"
_MAX_NAME = 255
_MAX_TAG = 128
_ALNUM_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_ALNUM = _ALNUM_LOWER | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_HEX = frozenset("0123456789abcdefABCDEF")
_WORD = _ALNUM | {"_"}


@dataclass(frozen=True)
class ImageRef:
    """A parsed, normalized image reference: `host/path...:tag@digest`."""

    host: str  # lowercase
    path: tuple[str, ...]
    tag: str | None  # `latest` when neither tag nor digest was written
    digest: str | None

    @property
    def components(self) -> tuple[str, ...]:
        return (self.host, *self.path)


def _split(text: str) -> tuple[str, str | None, str | None]:
    """(name, tag, digest) of `name[:tag][@digest]` (the tag's `:` comes after the last `/`)."""
    name, at, digest = text.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = None
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
    return name, tag, (digest if at else None)


def _is_host(first: str) -> bool:
    return "." in first or ":" in first or first == "localhost" or first.lower() != first


def _normalize(parts: list[str], spans_hosts: bool = False) -> tuple[str, ...]:
    """(host, *path) with Docker Hub's defaults; `spans_hosts`: a pattern starting with `**`."""
    if spans_hosts:
        return tuple(parts)
    if len(parts) > 1 and _is_host(parts[0]):
        host, path = parts[0].lower(), parts[1:]
        host = DEFAULT_HOST if host == _LEGACY_HOST else host
    else:
        host, path = DEFAULT_HOST, parts
    if host == DEFAULT_HOST and len(path) == 1:
        path = [_OFFICIAL, *path]
    return (host, *path)


def _valid_host(host: str) -> bool:
    """`name[:port]`: dot-separated labels of letters, digits and inner dashes, or `[IPv6]`."""
    if host.startswith("["):
        end = host.find("]")
        address, port = host[1:end], host[end + 1 :]
        if end < 0 or not address or not set(address) <= _HEX | {":"}:
            return False
    else:
        address, colon, digits = host.partition(":")
        port = colon + digits
        if not all(
            label and set(label) <= _ALNUM | {"-"} and label[0] in _ALNUM and label[-1] in _ALNUM
            for label in address.split(".")
        ):
            return False
    return not port or (port[0] == ":" and port[1:].isascii() and port[1:].isdigit())


def _valid_component(c: str) -> bool:
    """`[a-z0-9]+` runs separated by `.`, `_`, `__` or any number of `-` (Docker's grammar),
    checked by hand: the grammar's regex backtracks exponentially on a long bad component."""
    if not c or c[0] not in _ALNUM_LOWER or c[-1] not in _ALNUM_LOWER:
        return False
    sep = ""
    for ch in c:
        if ch in _ALNUM_LOWER:
            if sep and sep not in (".", "_", "__") and set(sep) != {"-"}:
                return False
            sep = ""
        elif ch in "._-":
            sep += ch
        else:
            return False
    return True


def _valid_tag(tag: str) -> bool:
    return 0 < len(tag) <= _MAX_TAG and tag[0] in _WORD and set(tag) <= _WORD | {".", "-"}


def _valid_digest(digest: str) -> bool:
    algorithm, colon, encoded = digest.partition(":")
    if not colon or len(encoded) < 32 or not set(encoded) <= _HEX:
        return False
    component = ""
    for ch in algorithm + "+":  # components [A-Za-z][A-Za-z0-9]* joined by one of -_+.
        if ch in "-_+.":
            if not component or component[0] not in _ALNUM - set("0123456789"):
                return False
            component = ""
        elif ch in _ALNUM:
            component += ch
        else:
            return False
    return True


@functools.lru_cache(maxsize=4096)
def parse(image: str) -> ImageRef | None:
    """The normalized reference, or None when `image` is not an image reference."""
    name, tag, digest = _split(image)
    if len(name) > _MAX_NAME or not name:
        return None
    parts = name.split("/")
    explicit_host = len(parts) > 1 and _is_host(parts[0])
    if explicit_host and not _valid_host(parts[0]):
        return None
    if not all(_valid_component(p) for p in parts[1 if explicit_host else 0 :]):
        return None
    if tag is not None and not _valid_tag(tag):
        return None
    if digest is not None and not _valid_digest(digest):
        return None
    components = _normalize(parts)
    if tag is None and digest is None:
        tag = "latest"
    return ImageRef(components[0], components[1:], tag, digest)


@dataclass(frozen=True)
class Pattern:
    """A parsed allowlist pattern; `everything` for `*` (and `**`) alone."""

    components: tuple[str, ...] = ()
    tag: str | None = None
    digest: str | None = None
    everything: bool = False


@functools.lru_cache(maxsize=4096)
def pattern(text: str) -> Pattern | None:
    """The parsed pattern, or None when it can match nothing (empty, an empty component)."""
    if text in ("*", "**"):
        return Pattern(everything=True)
    name, tag, digest = _split(text)
    parts = name.split("/")
    if not name or not all(parts) or tag == "" or digest == "":
        return None
    return Pattern(_normalize(parts, spans_hosts=parts[0] == "**"), tag, digest)


def _glob(pat: str, text: str) -> bool:
    """Shell-style `*` / `?` over one component (no `/` in either): the classic two-pointer
    match, O(len(pat) * len(text)) at worst, no backtracking beyond the last `*`."""
    p = t = 0
    star, mark = -1, 0
    while t < len(text):
        if p < len(pat) and pat[p] != "*" and (pat[p] == "?" or pat[p] == text[t]):
            p, t = p + 1, t + 1
        elif p < len(pat) and pat[p] == "*":
            star, mark, p = p, t, p + 1
        elif star >= 0:
            mark += 1
            p, t = star + 1, mark
        else:
            return False
    while p < len(pat) and pat[p] == "*":
        p += 1
    return p == len(pat)


def _components(pats: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Components against components, `**` matching any number of them (the same two-pointer
    scheme as `_glob`, one level up). The host component compares case-insensitively."""
    p = t = 0
    star, mark = -1, 0

    def one(pat: str, i: int) -> bool:
        return _glob(pat.lower(), parts[i]) if i == 0 else _glob(pat, parts[i])

    while t < len(parts):
        if p < len(pats) and pats[p] != "**" and one(pats[p], t):
            p, t = p + 1, t + 1
        elif p < len(pats) and pats[p] == "**":
            star, mark, p = p, t, p + 1
        elif star >= 0:
            mark += 1
            p, t = star + 1, mark
        else:
            return False
    while p < len(pats) and pats[p] == "**":
        p += 1
    return p == len(pats)


def matches(pattern_text: str, image: ImageRef) -> bool:
    """Whether the allowlist pattern admits the (parsed) image."""
    pat = pattern(pattern_text)
    if pat is None:
        return False
    if pat.everything:
        return True
    if not _components(pat.components, image.components):
        return False
    if pat.tag is not None and (image.tag is None or not _glob(pat.tag, image.tag)):
        return False
    if pat.digest is None:
        # the runtime pulls a digest whatever the tag says: a tag pattern vouches for no digest
        return pat.tag is None or image.digest is None
    return image.digest is not None and _glob(pat.digest, image.digest)
