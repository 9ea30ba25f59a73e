"""Which settled and started body steps get a Kubernetes Event of their own, and the Events that
sum up the rest.

Events go into one queue that every tenant shares (the Poster's, then the API server's), so a
`map` over 200,000 items must not post an Event per body step. Each control step's body steps get
Events of their own for their first BODY_EVENTS records (a small map's trace is complete); past
those, one `BodyStepsSettled` Event per control step each time another SUMMARY_EVERY of its body
records settled, with the counts by status. The whole run's body steps get at most
RUN_BODY_EVENTS Events of their own, all control steps together: thousands of small maps in one
Plan would otherwise post BODY_EVENTS each. Every step still has its JSON log line (the trace in
the operator's log is complete). Pure: decided from the run's records alone, so a restarted
operator posts the same summaries, not new ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from planops.engine import StepRecord

#: body records per control step that get an Event each
BODY_EVENTS = 20
#: past those, one summary Event per this many body records of a control step
SUMMARY_EVERY = 500
#: body records (and, apart, body starts) of the whole run that get an Event each
RUN_BODY_EVENTS = 200


def _control(step_id: str) -> str | None:
    ctl, dot, _ = step_id.partition(".")
    return ctl if dot else None


class BodyEvents:
    """One reconcile's view: `settled` is every record of the run (this pass's `new` included,
    at its end), `new` the records this pass settled."""

    def __init__(self, settled: Sequence[StepRecord], new: Sequence[StepRecord]) -> None:
        self.total: Counter[str] = Counter()
        self.by_status: dict[str, Counter[str]] = {}
        for r in settled:
            ctl = _control(r.step_id)
            if ctl is not None:
                self.total[ctl] += 1
                self.by_status.setdefault(ctl, Counter())[r.status] += 1
        self.before = Counter(self.total)
        for r in new:
            ctl = _control(r.step_id)
            if ctl is not None:
                self.before[ctl] -= 1
        self._seen: Counter[str] = Counter()
        self._started: Counter[str] = Counter()
        # what earlier passes posted, at most (each control step's first BODY_EVENTS)
        self._run_settled = sum(min(n, BODY_EVENTS) for n in self.before.values())
        self._run_started = sum(min(n, BODY_EVENTS) for n in self.total.values())

    def post_settled(self, step_id: str) -> bool:
        """Whether this pass's next settled record (in order) gets an Event of its own."""
        ctl = _control(step_id)
        if ctl is None:
            return True
        ordinal = self.before[ctl] + self._seen[ctl]
        self._seen[ctl] += 1
        if ordinal >= BODY_EVENTS or self._run_settled >= RUN_BODY_EVENTS:
            return False
        self._run_settled += 1
        return True

    def post_started(self, step_id: str) -> bool:
        """Whether a body step's start gets an Event: while its control step's records and the
        starts this pass posted are fewer than BODY_EVENTS."""
        ctl = _control(step_id)
        if ctl is None:
            return True
        self._started[ctl] += 1
        if self.total[ctl] + self._started[ctl] > BODY_EVENTS:
            return False
        if self._run_started >= RUN_BODY_EVENTS:
            return False
        self._run_started += 1
        return True

    def summaries(self) -> list[tuple[str, str, bool]]:
        """(control step, message, warning) of each summary Event this pass owes: a control step
        whose body records passed another multiple of SUMMARY_EVERY."""
        out = []
        for ctl, total in self.total.items():
            if total // SUMMARY_EVERY > self.before[ctl] // SUMMARY_EVERY:
                counts = self.by_status[ctl]
                parts = ", ".join(f"{counts[s]} {s}" for s in ("success", "failed", "skipped"))
                out.append(
                    (
                        ctl,
                        f"step {ctl}: {total} body steps settled ({parts}); past the first "
                        f"{BODY_EVENTS}, body steps are in the report and the operator's log, "
                        "not one Event each",
                        counts["failed"] > 0,
                    )
                )
        return out
