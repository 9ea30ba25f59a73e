"""Security: image allowlist patterns match image references component by component.

fnmatch over the whole string let `*` cross `/`: Capsule `images: ["busybox:*"]` admitted
`busybox:5000/evil/x:latest`, from the registry host `busybox:5000`. The rules are in
planops.engine.images (and docs/security.md).
"""

from __future__ import annotations

import pytest

from planops.engine import Policy, image_allowed, validate

from .helpers import capsule, plan, resolver

D = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64

TABLE = [
    # the attack: a registry host that looks like a repository and a tag
    ("busybox:*", "busybox:5000/evil/x:latest", False),
    ("busybox:*", "busybox:5000/library/busybox:1", False),
    # Docker Hub normalization: one repository, however it is spelled
    ("busybox:*", "busybox:1.36", True),
    ("busybox:*", "busybox", True),  # no tag: latest
    ("busybox:*", "library/busybox:1.36", True),
    ("busybox:*", "docker.io/library/busybox:1.36", True),
    ("busybox:*", "index.docker.io/library/busybox:1.36", True),
    ("docker.io/library/busybox:*", "busybox:1.36", True),
    ("docker.io/busybox:*", "busybox:1.36", True),
    ("busybox:*", "busybox:5000", True),  # Docker reads this as tag 5000 of busybox
    ("busybox:*", "ghcr.io/library/busybox:1.36", False),
    ("busybox", "busybox/evil:1", False),  # docker.io/busybox/evil is another repository
    ("team/*", "team/app:1", True),  # docker.io/team/*
    ("team/*", "ghcr.io/team/app:1", False),
    ("*/busybox", "evil.io/busybox", False),  # `*` here is a Docker Hub namespace
    ("local/busybox:*", "local/busybox:1.35.0", True),
    # a pattern without tag: the repository at any tag or digest
    ("busybox", "busybox:1.36", True),
    ("busybox", f"busybox@{D}", True),
    # tags
    ("busybox:1.36", "busybox", False),
    ("busybox:latest", "busybox", True),
    ("busybox:1.3?", "busybox:1.36", True),
    ("busybox:1.*", "busybox:2.0", False),
    ("busybox:*", f"busybox@{D}", False),  # a digest-only image has no tag
    # the runtime pulls by digest and ignores the tag: a tag pattern admits no digest
    ("busybox:1.*", f"busybox:1.36@{D}", False),
    ("busybox:*", f"busybox:1.36@{D}", False),
    ("busybox:latest", f"busybox:latest@{D}", False),
    ("**/busybox:*", f"ghcr.io/x/busybox:1@{D}", False),
    ("busybox:1.*@sha256:*", f"busybox:1.36@{D}", True),  # unless a digest pattern says so
    # `*` stays inside one component; `**` spans components
    ("registry.example.com/team/*", "registry.example.com/team/app:1", True),
    ("registry.example.com/team/*", "registry.example.com/team/sub/app:1", False),
    ("registry.example.com/team/**", "registry.example.com/team/sub/app:1", True),
    ("registry.example.com/team/*", "registry.example.com.evil.io/team/app", False),
    ("registry.example.com/*", "registry.example.com:443/app", False),
    ("**/busybox:*", "ghcr.io/mirror/busybox:1", True),
    ("**/busybox:*", "busybox:1", True),
    ("**/busybox:*", "ghcr.io/busybox-evil:1", False),
    ("*.example.com/app", "eu.example.com/app:3", True),
    ("*.example.com/app", "example.com/app:3", False),
    # ports and hosts
    ("localhost:5000/*", "localhost:5000/app:dev", True),
    ("localhost:5000/*", "localhost:5001/app", False),
    ("localhost:*/app", "localhost:5000/app", True),
    ("localhost/*", "localhost/app", True),
    ("[::1]:5000/*", "[::1]:5000/app", True),
    # digests: exactly, or by a wildcard on the digest part
    (f"busybox@{D}", f"busybox@{D}", True),
    (f"busybox@{D}", f"busybox:1.36@{D}", True),
    (f"busybox@{D}", f"busybox@{OTHER}", False),
    (f"busybox@{D}", "busybox:1.36", False),
    ("busybox@sha256:*", f"busybox@{D}", True),
    ("busybox@*", f"busybox@{D}", True),
    ("busybox:1.*@sha256:*", f"busybox:1.36@{D}", True),
    ("busybox:1.*@sha256:*", f"busybox:2@{D}", False),
    # uppercase: hosts are case-insensitive; repository paths are lowercase or not a reference
    ("registry.example.com/*", "REGISTRY.Example.com/app:1", True),
    ("REGISTRY.example.com/app", "registry.example.com/app:1", True),
    ("registry.example.com/*", "registry.example.com/App:1", False),
    ("busybox:*", "Busybox:1", False),
    ("busybox:*", "busybox:V1", True),  # tags may be uppercase
    # `*` (and `**`) alone: every reference; nothing matches what is not a reference
    ("*", f"anything.io/x/y/z:1@{D}", True),
    ("**", "x", True),
    ("*", "", False),
    ("*", "busybox:1.36 ", False),
    ("*", "a//b", False),
    ("*", "busybox@sha256:abc", False),  # a digest is 32+ hex digits
    ("*", "x" * 256, False),  # a name is at most 255 characters
    ("", "busybox", False),
    ("busybox:", "busybox", False),
]


@pytest.mark.parametrize(("pattern", "image", "expected"), TABLE)
def test_image_patterns(pattern, image, expected):
    cap = capsule(images=[pattern])
    assert image_allowed(image, cap, Policy()) is expected


def test_the_table_is_big_enough():
    assert len(TABLE) >= 25


def test_the_validator_refuses_the_registry_host_attack():
    cap = capsule(images=["busybox:*"])
    spec = plan({"id": "a", "shell": "true", "image": "busybox:5000/evil/x:latest"})
    assert [(e.code, e.path) for e in validate(spec, resolver(default=cap))] == [
        ("image-not-allowed", "steps[0].image")
    ]


def test_the_validator_refuses_a_digest_behind_an_allowed_tag():
    """`busybox:1.36@sha256:…` pulls the digest, whatever image it is: a tag pattern cannot
    vouch for it (the attack: an allowed tag in front of any image of the repository)."""
    cap = capsule(images=["busybox:1.*"])
    spec = plan({"id": "a", "shell": "true", "image": f"busybox:1.36@{OTHER}"})
    (error,) = validate(spec, resolver(default=cap))
    assert (error.code, error.path) == ("image-not-allowed", "steps[0].image")
    assert (
        validate(plan({"id": "a", "shell": "true", "image": "busybox:1.36"}), resolver(default=cap))
        == []
    )


def test_the_operators_allowlist_is_matched_the_same_way():
    cap = capsule(images=["*"])
    policy = Policy(images=("registry.example.com/**",))
    assert image_allowed("registry.example.com/team/app:1", cap, policy)
    assert not image_allowed("registry.example.com:5000/team/app:1", cap, policy)
    assert not image_allowed("busybox", cap, policy)
    tagged = Policy(images=("registry.example.com/team/app:1.*",))
    assert image_allowed("registry.example.com/team/app:1.2", cap, tagged)
    assert not image_allowed(f"registry.example.com/team/app:1.2@{D}", cap, tagged)


def test_the_capsules_default_image_is_allowed_however_it_is_spelled():
    cap = capsule(image="busybox:1.36", images=[])
    assert image_allowed("docker.io/library/busybox:1.36", cap, Policy())
    assert not image_allowed("busybox:1.37", cap, Policy())


def test_a_string_that_is_no_image_reference_is_refused_saying_so():
    spec = plan({"id": "a", "shell": "true", "image": "Busybox:1"})
    (error,) = validate(spec, resolver(default=capsule(images=["*"])))
    assert error.code == "image-not-allowed"
    assert "is not an image reference" in error.message
