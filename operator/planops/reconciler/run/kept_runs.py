"""Each running Plan's kept Run (engine.keeping), and exactly what it was kept with.

A reconcile that restored a big run from all its settled records paid O(records) in time and in
transient memory to settle one more step. The reconciler keeps the Run it decided with instead,
per Plan, for the next reconcile of the same run. A kept Run is a shortcut, never a source of
truth: the cluster still holds everything (a restarted operator restores, as before), and the
next reconcile uses it only when what it starts from is what this one left:

- the same Plan, run and generation, the same judged spec and Capsule (the same objects);
- the Plan as this reconciler left it (its resourceVersion: no other writer, no other leader,
  no status write lost in between; a failed write raised before the Run was put back);
- the same PlanReports book (not listed again since), holding the records as the run has them;

and then engine.keeping checks the facts themselves. Anything else restores. The map is bounded
(least recently used first out) and forgets a run when it ends, its Plan goes, or this replica
starts leading.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from planops.engine import StepRecord
from planops.engine.keeping import Kept

#: runs kept at once (a 20,000-step run's Run holds ~3 MiB; most are small)
KEPT_RUNS = 64

Key = tuple[str, str]


@dataclass(frozen=True)
class Basis:
    """What a kept Run was kept with; the next reconcile's must be the same."""

    uid: str
    run: str
    generation: int
    #: the Plan's resourceVersion as this reconcile left it
    version: str | None
    #: the judged spec, the Capsule and the PlanReports book: the same objects, not equal ones
    spec: object
    capsule: object
    written: object

    def same(self, other: Basis) -> bool:
        return (
            self.version is not None
            and (self.uid, self.run, self.generation, self.version)
            == (other.uid, other.run, other.generation, other.version)
            and self.spec is other.spec
            and self.capsule is other.capsule
            and self.written is other.written
        )


def written_as_run(
    own: tuple[StepRecord, ...], written: tuple[StepRecord, ...], since: int
) -> bool:
    """Whether the records written hold the run's records as it has them (the ones settled
    `since` the reconcile began: the earlier ones were checked before). A record cut to its
    share of the report is not: a restore would read the cut one."""
    return len(own) == len(written) and own[since:] == written[since:]


class KeptRuns:
    def __init__(self, limit: int = KEPT_RUNS) -> None:
        self.limit = limit
        self._runs: OrderedDict[Key, tuple[Basis, Kept]] = OrderedDict()

    def take(self, key: Key, basis: Basis) -> Kept | None:
        """The Run kept for this Plan if it was kept with `basis`; taken out either way (a
        reconcile that fails before it puts its Run back leaves nothing to trust)."""
        found = self._runs.pop(key, None)
        if found is None or not found[0].same(basis):
            return None
        return found[1]

    def put(self, key: Key, basis: Basis, kept: Kept) -> None:
        self._runs[key] = (basis, kept)
        self._runs.move_to_end(key)
        while len(self._runs) > self.limit:
            self._runs.popitem(last=False)  # the least recently used

    def drop(self, key: Key) -> None:
        self._runs.pop(key, None)

    def clear(self) -> None:
        self._runs.clear()

    def __len__(self) -> int:
        return len(self._runs)
