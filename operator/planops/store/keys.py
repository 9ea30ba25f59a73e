"""Pure: where a run's objects live in the artifact repository. One function makes every key, so
no caller builds a key by hand and no Plan can name another's objects.

Layout, under the repository's key prefix:

    PREFIX/NAMESPACE/PLAN_UID/RUN/STEP/artifacts/NAME    a step's artifact (a file or a tarball)
    PREFIX/NAMESPACE/PLAN_UID/RUN/STEP/logs/ATTEMPT.log  an attempt's full log
    PREFIX/NAMESPACE/PLAN_UID/RUN/STEP/results/NAME      a step's result file (when stored)

Every part comes from the operator (the namespace and uid are the API server's; the run id and
step id are checked by the validator), and each is checked again here: a part with a slash, a
`..`, or a character outside its pattern is refused, so a Plan's names can only ever select
objects beneath its own namespace and uid. A Plan's uid is unique in the cluster and never
reused, so a deleted Plan's objects cannot be read by a new Plan of the same name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from planops.api.labels import DNS_LABEL_PATTERN
from planops.api.models import STEP_ID_PATTERN

#: a Kubernetes namespace (a DNS label)
_NAMESPACE = re.compile(DNS_LABEL_PATTERN)
#: a Kubernetes uid (RFC 4122 text; tests' fakes use any lower-case hex and dashes)
_UID = re.compile(r"^[0-9a-f][0-9a-f-]{0,62}$")
#: a run's id (the reconciler's run identity: letters, digits, dot, dash, underscore)
_RUN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,62}$")
#: a step's id
_STEP = re.compile(STEP_ID_PATTERN)
#: an artifact's or result's name
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,62}$")
#: a key prefix: segments of [A-Za-z0-9._-], joined by single slashes, no `..`
_PREFIX = re.compile(
    r"^([A-Za-z0-9_-][A-Za-z0-9._-]{0,62})(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}){0,7}$"
)

Kind = Literal["artifacts", "logs", "results"]


class BadKeyError(ValueError):
    """A part of a key is not what its pattern allows."""


def _check(what: str, value: str, pattern: re.Pattern[str]) -> str:
    if not isinstance(value, str) or not pattern.match(value) or ".." in value:
        raise BadKeyError(f"{what} {value!r} cannot be part of a storage key ({pattern.pattern})")
    return value


def check_prefix(prefix: str) -> str:
    """The repository's key prefix, or '' (checked: the validator and the model call this)."""
    return _check("key prefix", prefix, _PREFIX) if prefix else ""


@dataclass(frozen=True)
class RunKeys:
    """The keys of one run of one Plan: every object of the run is beneath `run_prefix`."""

    prefix: str
    namespace: str
    plan_uid: str
    run: str

    def __post_init__(self) -> None:
        check_prefix(self.prefix)
        _check("namespace", self.namespace, _NAMESPACE)
        _check("plan uid", self.plan_uid, _UID)
        _check("run id", self.run, _RUN)

    @property
    def plan_prefix(self) -> str:
        """Beneath it, every run of the Plan (what the Plan's deletion removes)."""
        return plan_prefix(self.prefix, self.namespace, self.plan_uid)

    @property
    def run_prefix(self) -> str:
        """Beneath it, every object of the run (what the run's GC removes); ends in '/'."""
        return f"{self.plan_prefix}{self.run}/"

    def step_prefix(self, step: str) -> str:
        return f"{self.run_prefix}{_check('step id', step, _STEP)}/"

    def artifact(self, step: str, name: str) -> str:
        return f"{self.step_prefix(step)}artifacts/{_check('artifact name', name, _NAME)}"

    def result(self, step: str, name: str) -> str:
        return f"{self.step_prefix(step)}results/{_check('result name', name, _NAME)}"

    def log(self, step: str, attempt: int) -> str:
        if not isinstance(attempt, int) or isinstance(attempt, bool) or not 0 <= attempt < 10**6:
            raise BadKeyError(f"attempt {attempt!r} cannot be part of a storage key")
        return f"{self.step_prefix(step)}logs/{attempt}.log"


def plan_prefix(prefix: str, namespace: str, plan_uid: str) -> str:
    """Beneath it, every run of one Plan; ends in '/'."""
    head = f"{check_prefix(prefix)}/" if prefix else ""
    ns = _check("namespace", namespace, _NAMESPACE)
    return f"{head}{ns}/{_check('plan uid', plan_uid, _UID)}/"


@dataclass(frozen=True)
class Parsed:
    """What a stored key says: its run, step, kind and name (an attempt's log: `N.log`)."""

    run: str
    step: str
    kind: str
    name: str


def parse(plan_prefix_: str, key: str) -> Parsed | None:
    """A listed key beneath a Plan's prefix, split into its parts; None if it is not one of
    this layout's (a foreign object under the prefix is shown by the caller as it is)."""
    if not key.startswith(plan_prefix_):
        return None
    parts = key[len(plan_prefix_) :].split("/")
    if len(parts) != 4 or parts[2] not in ("artifacts", "logs", "results"):
        return None
    return Parsed(run=parts[0], step=parts[1], kind=parts[2], name=parts[3])
