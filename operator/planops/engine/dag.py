"""The dependency graph of a plan, built once, used by both the validator and the decider.

Everything here is linear in steps + edges: plans of 100k steps are validated and scheduled
without rescans (see bench/engine.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Graph:
    """Steps by declaration index; deps/dependents hold indexes (unknown ids are dropped)."""

    ids: tuple[str, ...]
    index: dict[str, int]
    deps: tuple[tuple[int, ...], ...]
    dependents: tuple[tuple[int, ...], ...]

    @classmethod
    def build(cls, ids: Sequence[str], depends_on: Sequence[Sequence[str]]) -> Graph:
        index: dict[str, int] = {}
        for i, sid in enumerate(ids):
            index.setdefault(sid, i)  # a duplicate id keeps its first declaration
        deps: list[tuple[int, ...]] = []
        dependents: list[list[int]] = [[] for _ in ids]
        for i, names in enumerate(depends_on):
            row = tuple(dict.fromkeys(index[n] for n in names if n in index))
            deps.append(row)
            for d in row:
                dependents[d].append(i)
        return cls(tuple(ids), index, tuple(deps), tuple(tuple(d) for d in dependents))

    def cycles(self) -> list[list[str]]:
        """Each dependency cycle (a strongly connected component that loops), by step ids.

        Iterative Tarjan: no recursion limit for long chains. Steps of a cycle are listed in
        declaration order; cycles are listed by their first step.
        """
        n = len(self.ids)
        order = [-1] * n
        low = [0] * n
        on_stack = [False] * n
        stack: list[int] = []
        found: list[list[int]] = []
        counter = 0
        for root in range(n):
            if order[root] >= 0:
                continue
            work: list[tuple[int, int]] = [(root, 0)]
            while work:
                v, k = work[-1]
                if k == 0:
                    order[v] = low[v] = counter
                    counter += 1
                    stack.append(v)
                    on_stack[v] = True
                edges = self.deps[v]
                if k < len(edges):
                    work[-1] = (v, k + 1)
                    w = edges[k]
                    if order[w] < 0:
                        work.append((w, 0))
                    elif on_stack[w]:
                        low[v] = min(low[v], order[w])
                    continue
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[v])
                if low[v] == order[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack[w] = False
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1 or v in self.deps[v]:
                        found.append(sorted(comp))
        return [[self.ids[i] for i in comp] for comp in sorted(found)]
