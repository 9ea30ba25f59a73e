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
        get = index.get
        deps = [
            tuple(dict.fromkeys(j for j in map(get, names) if j is not None)) if names else ()
            for names in depends_on
        ]
        dependents: list[list[int]] = [[] for _ in ids]
        for i, row in enumerate(deps):
            for d in row:
                dependents[d].append(i)
        return cls(tuple(ids), index, tuple(deps), tuple(map(tuple, dependents)))

    def _unordered(self) -> list[int]:
        """Steps Kahn's algorithm cannot order: empty iff the graph has no cycle. One pass."""
        remaining = [len(d) for d in self.deps]
        queue = [i for i, r in enumerate(remaining) if r == 0]
        for v in queue:  # the list grows while we walk it
            for w in self.dependents[v]:
                remaining[w] -= 1
                if remaining[w] == 0:
                    queue.append(w)
        return [i for i, r in enumerate(remaining) if r > 0] if len(queue) < len(self.ids) else []

    def cycles(self) -> list[list[str]]:
        """Each dependency cycle (a strongly connected component that loops), by step ids.

        Kahn's count first (cheap, and enough for the usual acyclic plan); iterative Tarjan only
        over the steps it could not order. Steps of a cycle are listed in declaration order;
        cycles by their first step.
        """
        suspects = self._unordered()
        if not suspects:
            return []
        n = len(self.ids)
        order = [-1] * n
        low = [0] * n
        on_stack = [False] * n
        stack: list[int] = []
        found: list[list[int]] = []
        counter = 0
        for root in suspects:
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

    def cycle_path(self, cycle: list[str]) -> list[str]:
        """A closed walk through `cycle` along real edges: [a, c, b, a] means a waits for c,
        c waits for b, b waits for a. Breadth-first, so the shortest way back is shown."""
        members = {self.index[s] for s in cycle}
        start = self.index[cycle[0]]
        reached_from: dict[int, int] = {}
        frontier = [start]
        while frontier:
            nxt = []
            for v in frontier:
                for w in self.deps[v]:
                    if w == start:
                        chain = [v]
                        while chain[-1] != start:
                            chain.append(reached_from[chain[-1]])
                        return [self.ids[i] for i in [*reversed(chain), start]]
                    if w in members and w not in reached_from:
                        reached_from[w] = v
                        nxt.append(w)
            frontier = nxt
        return [*cycle, cycle[0]]  # unreachable for a real cycle
