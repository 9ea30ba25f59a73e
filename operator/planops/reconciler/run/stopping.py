"""Pure: whether a run is stopped from outside its steps now, and the objects stopping deletes.

A run stops when somebody cancels it (`kubectl plan cancel` writes the cancel annotation; with
`--run-finally` the cancel-run-finally annotation, and the finally steps run after) or when its
main steps run past the plan's `activeDeadlineSeconds` (the finally steps run after, within
their own budget). What a stop does to the run is the engine's rule (`Run.halt`, with the
deadline and the budget in engine.finally_steps), which the local runner applies too; here is
what the Plan asks for now, the stop its status already holds (a stop holds once written: taking
the annotation away does not resume the steps it stopped), and each stopped attempt's object
(its Job or child Plan) for the actuator to delete. Everything is decided from the Plan and what
was observed, with the clock passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from planops.api import PlanSpec, names
from planops.engine import finally_steps
from planops.engine.report import Halt
from planops.reconciler.run.observe import Observed

deadline = finally_steps.deadline


def cancel_of(annotations: Mapping[str, str]) -> tuple[str, bool] | None:
    """The cancel the Plan asks for: (its text, whether the finally steps run after it), or
    None. A plain cancel wins over one that runs the finally steps: it is how a cleanup that
    runs too long is stopped too."""
    plain = annotations.get(names.ANNOTATION_CANCEL)
    if plain:
        return str(plain), False
    run_finally = annotations.get(names.ANNOTATION_CANCEL_RUN_FINALLY)
    if run_finally:
        return str(run_finally), True
    return None


def why_stop(
    annotations: Mapping[str, str],
    spec: PlanSpec,
    started_at: float,
    now: float,
    *,
    admitted: bool = True,
) -> Halt | None:
    """The stop the Plan asks for now (a cancel first, then its deadline), or None: it goes on.
    `admitted` False: the run never started (it waited for a Capsule's slot), so a cancel runs
    no finally step either: nothing ran that needs cleaning up, and nothing may start without
    a slot."""
    cancel = cancel_of(annotations)
    if cancel is not None:
        why, run_finally = cancel
        return finally_steps.cancelled(why, now, run_finally=run_finally and admitted)
    return finally_steps.past_deadline(spec, started_at, now)


def held(previous: Mapping[str, Any]) -> tuple[Halt, ...]:
    """The stops the run's status holds (its report's `stopped`), in order."""
    stops = (previous.get("report") or {}).get("stopped")
    found = (Halt.from_json(data) for data in (stops if isinstance(stops, list) else []))
    return tuple(h for h in found if h is not None)


def persisted(previous: Mapping[str, Any]) -> Halt | None:
    """The stop of the main steps the run's status holds, if any."""
    return next((h for h in held(previous) if h.steps == "main"), None)


def deletes(
    stopped: Iterable[tuple[str, int]], observed: Iterable[Observed]
) -> tuple[tuple[Literal["job", "plan"], str], ...]:
    """The objects of the attempts a stop recorded failed: each one's Job or child Plan (one
    not observed has none to delete)."""
    objects = {(o.step_id, o.attempt): o for o in observed}
    return tuple(
        (obj.kind, obj.object_name) for key in stopped if (obj := objects.get(key)) is not None
    )
