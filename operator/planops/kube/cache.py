"""Objects the operator watches anyway, kept as the watch last showed them, so that a reconcile
reads them without a request.

Only for objects whose staleness is harmless and announced: a Capsule changes rarely, and its
change wakes every Plan of its namespace (handlers.capsule_event), which reads it again from
here. A name the cache has not seen (the watch's first listing not yet through, or a Capsule
that does not exist) is read from the API server, so a missing entry never means "absent".
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]
#: ended runs remembered, so that late events of their objects do not bring them back
CLOSED_KEPT = 50_000


def _slim(obj: Obj) -> Obj:
    """The object without what no reader of the caches needs: the API server's field-ownership
    bookkeeping (`managedFields`, a third of a watched pod's size)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


#: what the reconciler reads of a run's Job or pod (reconciler.observe); the rest of a pod
#: (volumes, env, tolerations, images...) is most of its size, and a plan of 20,000 steps
#: keeps 40,000 of them (whole, they cost ~25 KB a step at 2,000 steps: docs/performance.md)
_RUN_META = (
    "name",
    "namespace",
    "uid",
    "labels",
    "annotations",
    "ownerReferences",
    "creationTimestamp",
    "deletionTimestamp",
    "resourceVersion",
)


def _containers(spec: Any) -> list[Obj]:
    found = spec.get("containers") if isinstance(spec, dict) else None
    return [
        {k: c[k] for k in ("name", "resources") if k in c}
        for c in found or []
        if isinstance(c, dict)
    ]


def slim_run_object(kind: str, obj: Obj) -> Obj:
    """A run's Job or pod as the cache keeps it: its identity, status and the few spec fields
    an attempt's outcome is read from (a Job's deadline and container limits; a pod's node,
    deadline and container limits)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    out: Obj = {
        "metadata": {k: meta[k] for k in _RUN_META if k in meta},
        "status": obj.get("status") or {},
    }
    if kind == "job":
        template = (spec.get("template") or {}).get("spec")
        kept: Obj = {"template": {"spec": {"containers": _containers(template)}}}
    else:
        kept = {"containers": _containers(spec)}
        if "nodeName" in spec:
            kept["nodeName"] = spec["nodeName"]
    if "activeDeadlineSeconds" in spec:
        kept["activeDeadlineSeconds"] = spec["activeDeadlineSeconds"]
    out["spec"] = kept
    return out


def _newer(new: Obj, old: Obj | None) -> bool:
    """Whether `new` is a later version than `old` (resourceVersions are etcd revisions in
    practice; one that is not a number is taken as newer, as a watch's order says)."""
    if old is None:
        return True
    a = str((new.get("metadata") or {}).get("resourceVersion", ""))
    b = str((old.get("metadata") or {}).get("resourceVersion", ""))
    return not (a.isdigit() and b.isdigit()) or int(a) >= int(b)


class WatchCache:
    """Namespaced objects by (namespace, name), fed by watch events; with `index`, also grouped
    by the key it gives each object, if any (the Plans of one Capsule are read without a pass over
    every Plan of the cluster)."""

    def __init__(self, index: Callable[[Obj], tuple[str, str] | None] | None = None) -> None:
        self._objects: dict[tuple[str, str], Obj] = {}
        self._index = index
        self._groups: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}

    def _drop(self, key: tuple[str, str]) -> None:
        old = self._objects.pop(key, None)
        if old is None or self._index is None:
            return
        group = self._index(old)
        if group is None:
            return
        members = self._groups.get(group, {})
        members.pop(key, None)
        if not members:
            self._groups.pop(group, None)

    def seen(self, event_type: str | None, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        if event_type == "DELETED":
            self._drop(key)
        elif _newer(obj, self._objects.get(key)):
            self._drop(key)
            self._objects[key] = kept = _slim(obj)
            group = self._index(kept) if self._index is not None else None
            if group is not None:
                self._groups.setdefault(group, {})[key] = kept

    def get(self, namespace: str, name: str) -> Obj | None:
        """The object as last seen, or None when the cache has not seen it (ask the API)."""
        return self._objects.get((namespace, name))

    def values(self) -> list[Obj]:
        """Every object held (a copy of the list: the watch may change the cache meanwhile)."""
        return list(self._objects.values())

    def group(self, key: tuple[str, str]) -> list[Obj] | None:
        """The objects the index puts under `key` (a copy), or None without an index."""
        if self._index is None:
            return None
        return list(self._groups.get(key, {}).values())


RunKey = tuple[str, str, str]  # namespace, the Plan's label value, run id


class RunObjects:
    """The Jobs and pods of Plans' runs, by the labels a run's selector matches
    (`PlanRef.selector()`: the Plan's label value and the run id), fed by the watches the
    operator has anyway. The reconciler reads a run's objects from here instead of listing them,
    except when it cannot trust what it holds (see reconciler.reading.RunReader.objects)."""

    def __init__(self, plan_label: str, run_label: str) -> None:
        self._labels = (plan_label, run_label)
        self._objects: dict[str, dict[RunKey, dict[str, Obj]]] = {"job": {}, "pod": {}}
        self._where: dict[tuple[str, str, str], RunKey] = {}  # (kind, ns, name) -> its run
        self._closed: OrderedDict[RunKey, None] = OrderedDict()

    def _key(self, obj: Obj) -> RunKey | None:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        plan, run = labels.get(self._labels[0]), labels.get(self._labels[1])
        if not isinstance(plan, str) or not isinstance(run, str):
            return None
        return str(meta.get("namespace", "")), plan, run

    def seen(self, kind: str, event_type: str | None, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        where = (kind, str(meta.get("namespace", "")), str(meta.get("name", "")))
        old_key = self._where.get(where)
        old = self._objects[kind].get(old_key, {}).get(where[2]) if old_key else None
        if event_type != "DELETED" and old is not None and not _newer(obj, old):
            return  # an older version arriving late
        if old_key is not None:
            self._objects[kind][old_key].pop(where[2], None)
            if not self._objects[kind][old_key]:
                del self._objects[kind][old_key]
            del self._where[where]
        key = self._key(obj)
        if event_type == "DELETED" or key is None or key in self._closed:
            return
        self._objects[kind].setdefault(key, {})[where[2]] = slim_run_object(kind, obj)
        self._where[where] = key

    def close(self, key: RunKey) -> None:
        """The run ended: a finished run is never reconciled again, so its objects leave the
        cache, and their later events (a Job's pods are updated after it completes, a TTL deletes
        them) are ignored. A new run has a new id."""
        for kind, runs in self._objects.items():
            for name in runs.pop(key, {}):
                self._where.pop((kind, key[0], name), None)
        self._closed[key] = None
        self._closed.move_to_end(key)
        while len(self._closed) > CLOSED_KEPT:
            self._closed.popitem(last=False)

    def of(self, kind: str, key: RunKey) -> list[Obj]:
        return list(self._objects[kind].get(key, {}).values())

    def replace(self, kind: str, key: RunKey, objs: list[Obj]) -> None:
        """What a list of the run's objects showed: what it does not hold is gone (a deletion
        the watch did not deliver); what it holds is kept unless the watch already brought a
        newer version while the list was on its way."""
        listed = {str((o.get("metadata") or {}).get("name", "")) for o in objs}
        for obj in self.of(kind, key):
            if str((obj.get("metadata") or {}).get("name", "")) not in listed:
                self.seen(kind, "DELETED", obj)
        for obj in objs:
            self.seen(kind, "ADDED", obj)
