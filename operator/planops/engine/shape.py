"""What the decider derives from a plan's spec alone, computed once per spec object.

The reconciler restores a Run from its facts on every reconcile (decider.Run.restore), and the
spec does not change between them: the reconciler keeps one judged PlanSpec per generation
(Reconciler.judge). Deriving the graph, each step's kind, whether its input has references or
templates, and its parsed `if` was ~70 % of restoring a 20,000-step run (bench/engine.py's
restore figures, docs/performance.md): work that grew with the plan on every reconcile. Kept
per spec object here, and dropped when the spec is (a weak reference's finalizer), a reconcile
of a big plan pays for its facts only.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass

from planops.api.models import PlanSpec
from planops.engine import conditions, references, templates
from planops.engine.dag import Graph
from planops.engine.facts import Kind, step_kind


@dataclass(frozen=True)
class Shape:
    """A spec's derived facts, read-only (a Run never changes them; shared between Runs)."""

    graph: Graph
    kinds: tuple[Kind, ...]
    has_refs: tuple[bool, ...]
    has_templates: tuple[bool, ...]
    #: each step's count of dependencies (none settled yet)
    unsettled_deps: tuple[int, ...]
    #: parsed `if` expressions by step index
    conditions: Mapping[int, conditions.Or]
    #: steps with no dependency, in declaration order: the ready steps of a run that has not
    #: started (split as the decider queues them: tool steps run one at a time)
    roots_tools: tuple[int, ...]
    roots_other: tuple[int, ...]

    @classmethod
    def of(cls, spec: PlanSpec) -> Shape:
        steps = spec.steps
        graph = Graph.build([s.id for s in steps], [s.depends_on for s in steps])
        kinds = tuple(step_kind(s) for s in steps)
        roots = [i for i, d in enumerate(graph.deps) if not d]
        return cls(
            graph,
            kinds,
            tuple(next(references.walk(s.input), None) is not None for s in steps),
            tuple(
                "{{" in (s.shell or "")
                or next(templates.find(s.input), None) is not None
                or s.ask is not None
                for s in steps
            ),
            tuple(map(len, graph.deps)),
            {i: conditions.parse(s.if_) for i, s in enumerate(steps) if s.if_ is not None},
            tuple(i for i in roots if kinds[i] == "tool"),
            tuple(i for i in roots if kinds[i] != "tool"),
        )


_shapes: dict[int, Shape] = {}


def shape_of(spec: PlanSpec) -> Shape:
    """The spec's Shape, computed on its first use and kept while the spec object lives.

    Keyed by the object's id: the finalizer removes the entry when the spec is collected, before
    its id can be reused. A spec is not changed after it is parsed (nothing in planops assigns to
    a parsed model)."""
    key = id(spec)
    found = _shapes.get(key)
    if found is None:
        found = _shapes[key] = Shape.of(spec)
        weakref.finalize(spec, _shapes.pop, key, None)
    return found
