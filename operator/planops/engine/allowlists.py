"""What a Capsule and the operator allow a step to run: the binary of a shell line (its first
word, split as a POSIX shell would) and the image the step runs in. The validator refuses a plan
on these before anything runs, and every executor asks them again right before it starts a step
(a Capsule may have changed since the plan was judged), so both ask the same functions: whatever
the validator accepts about a step's image, dispatch accepts (`image_refusal`).

**Which image a step runs in** (`step_image`): a tool step, its tool's `image`, else the
Capsule's `image`; a shell or script step, its own `image`, else the Capsule's. Other steps run no
container of their own (a capsule step's child plan has its own steps; control steps are
evaluated by the engine).

**Who allows it**: the Capsule allows the images it names for the step itself (its `image`, for
every step; a tool's `image`, for that tool's steps) and those matching its `images` patterns;
the operator's allowlist (`policy.allowedImages`) bounds them all. A tool's image is not
allowed for a shell step that names it: it is the Capsule owner's for that tool's command.
"""

from __future__ import annotations

import re
import shlex
from typing import Literal

from planops.api.capsule_models import CapsuleSpec
from planops.api.models import Step
from planops.engine import images
from planops.engine.policy import Policy

_SHLEX_WHITESPACE = re.compile(r"[ \t\r\n]+")

#: who named the image a step runs in: the step itself, its tool, or its Capsule (the default)
NamedBy = Literal["step", "tool", "capsule"]
#: the steps that run in an image of their own (a Job's container, in the cluster)
IMAGE_KINDS = ("tool", "shell", "script")


def shell_words(command: str) -> list[str]:
    """The words of a shell step (shlex, POSIX rules); raises ValueError when it cannot split.

    shlex tokenizes character by character in Python; a line without quotes or backslashes splits
    exactly on shlex's whitespace (space, tab, CR, LF), which is 50x faster for big plans.
    """
    if not any(c in command for c in "'\"\\"):
        return [w for w in _SHLEX_WHITESPACE.split(command) if w]
    return shlex.split(command, comments=False, posix=True)


def _by_capsule(ref: images.ImageRef, capsule: CapsuleSpec, own: str | None = None) -> bool:
    """The Capsule allows `ref`: it is the Capsule's image, `own` (an image the Capsule names for
    this step: its tool's), or matches one of its `images` patterns."""
    named = (capsule.image, own)
    return any(n is not None and images.parse(n) == ref for n in named) or any(
        images.matches(p, ref) for p in capsule.images
    )


def _by_operator(ref: images.ImageRef, policy: Policy) -> bool:
    return any(images.matches(p, ref) for p in policy.images)


def image_allowed(image: str, capsule: CapsuleSpec, policy: Policy) -> bool:
    """Allowed by the capsule's patterns (or its default image) *and* the operator's, matched
    component by component (engine.images): a `*` never crosses a `/`. Not an image reference
    at all: allowed by nothing. (The rule for an image a step names itself; `image_refusal`
    applies it, and a tool's own image, to any step.)"""
    ref = images.parse(image)
    return ref is not None and _by_capsule(ref, capsule) and _by_operator(ref, policy)


def step_image(kind: str, step: Step, capsule: CapsuleSpec) -> tuple[str | None, NamedBy]:
    """The image a tool, shell or script step runs in and who named it; (None, "capsule") when
    nothing names one (or the step runs in no image of its own)."""
    if kind == "tool":
        tool = capsule.tool(step.tool or "")
        if tool is not None and tool.image is not None:
            return tool.image, "tool"
    elif kind in ("shell", "script") and step.image is not None:
        return step.image, "step"
    return (capsule.image if kind in IMAGE_KINDS else None), "capsule"


def image_refusal(
    kind: str, step: Step, capsule: CapsuleSpec, policy: Policy, *, needs_image: bool
) -> str | None:
    """Why the step may not run in its image (None: it may): the one image rule of the
    validator and of dispatch. `needs_image`: the step runs in a container (the cluster), so a
    step without an image cannot run; a local process needs none, but an image that is named
    must be allowed all the same."""
    image, named_by = step_image(kind, step, capsule)
    if image is None:
        if needs_image and kind in IMAGE_KINDS:
            return "no image for this step (set the Capsule's image or the step's image)"
        return None
    whose = {
        "step": "image",
        "tool": f"tool {step.tool!r}'s image",
        "capsule": "the Capsule's image",
    }
    own = image if named_by == "tool" else None
    return named_image_refusal(image, whose[named_by], capsule, policy, own=own)


def named_image_refusal(
    image: str, whose: str, capsule: CapsuleSpec, policy: Policy, *, own: str | None
) -> str | None:
    """Why `image` (`whose`, for the message) may not run, or None: it is an image reference the
    Capsule allows (its image, `own`: an image it names for this container, or its `images`
    patterns) and the operator's allowlist too. A service's image is its Capsule's own, as a
    tool's is (engine.pod_grants)."""
    ref = images.parse(image)
    if ref is None:
        return (
            f"{whose} {image!r} is not an image reference "
            "([host[:port]/]path[:tag][@digest], the path in lowercase)"
        )
    if not _by_capsule(ref, capsule, own):
        return f"{whose} {image!r} is not allowed by the Capsule (its images, or its image)"
    if not _by_operator(ref, policy):
        return (
            f"{whose} {image!r} is not allowed by the operator's allowlist (policy.allowedImages)"
        )
    return None
