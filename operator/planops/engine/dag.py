"""The dependency graph of a plan, built once, used by both the validator and the decider.

Everything here is linear in steps + edges: plans of 100k steps are validated and scheduled
without rescans (see bench/engine.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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

    def order(self) -> list[int]:
        """Kahn's topological order: every step after its dependencies. Steps in a cycle, or
        behind one, are left out (the list is shorter than the plan). One pass."""
        remaining = [len(d) for d in self.deps]
        queue = [i for i, r in enumerate(remaining) if r == 0]
        for v in queue:  # the list grows while we walk it
            for w in self.dependents[v]:
                remaining[w] -= 1
                if remaining[w] == 0:
                    queue.append(w)
        return queue

    def _unordered(self) -> list[int]:
        """Steps Kahn's algorithm cannot order: empty iff the graph has no cycle."""
        ordered = self.order()
        if len(ordered) == len(self.ids):
            return []
        placed = set(ordered)
        return [i for i in range(len(self.ids)) if i not in placed]

    def ancestors(self, i: int) -> set[int]:
        """Every step that step i waits for, directly or through others (a walk: O(steps))."""
        seen: set[int] = set()
        stack = list(self.deps[i])
        while stack:
            j = stack.pop()
            if j not in seen:
                seen.add(j)
                stack.extend(self.deps[j])
        return seen

    def waits_for(self, asked: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
        """Of the pairs (i, r) asked, those where step i waits for step r (r is an ancestor).

        One pass in topological order for all of them, never a walk per question (that was
        quadratic: a chain of n steps, each naming a step two back, walked n^2/2 edges). Each
        step's ancestors among the steps asked about are a bitset (a Python int) made from its
        dependencies' ones, and a step's bitset is dropped once all its dependents have theirs:
        O((steps + edges) x asked-about steps / 64) machine words. Steps Kahn's order leaves out
        (in or behind a cycle, which the validator refuses anyway) are walked one by one."""
        by_step: dict[int, list[int]] = {}
        for i, r in asked:
            by_step.setdefault(i, []).append(r)
        if not by_step:
            return set()
        bit = {r: 1 << k for k, r in enumerate(sorted({r for rs in by_step.values() for r in rs}))}
        get, deps = bit.get, self.deps
        left = [len(d) for d in self.dependents]
        reach: dict[int, int] = {}
        found: set[tuple[int, int]] = set()
        order = self.order()
        for v in order:
            mask = 0
            for d in deps[v]:
                mask |= reach[d] | get(d, 0)
                left[d] -= 1
                if not left[d]:
                    del reach[d]
            rs = by_step.get(v)
            if rs is not None:
                found.update((v, r) for r in rs if mask & bit[r])
            if left[v]:
                reach[v] = mask
        if len(order) < len(self.ids):
            placed = set(order)
            for v, rs in by_step.items():
                if v not in placed:
                    above = self.ancestors(v)
                    found.update((v, r) for r in rs if r in above)
        return found

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
