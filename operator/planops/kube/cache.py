"""Objects the operator watches anyway, kept as the watch last showed them, so that a reconcile
reads them without a request.

Only for objects whose staleness is harmless and announced: a Capsule changes rarely, and its
change wakes every Plan of its namespace (handlers.capsule_event), which reads it again from
here. A name the cache has not seen (the watch's first listing not yet through, or a Capsule
that does not exist) is read from the API server, so a missing entry never means "absent".
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

from planops.api.names import KEY_PREFIX

Obj = dict[str, Any]


def slim_unless(kind: str, dropped: Callable[[Obj], bool]) -> Callable[[Obj], Obj | None]:
    """What a list keeps of each object as its page arrives: the slim object, or nothing of
    one `dropped` (a settled step's: a big run's list never holds them all at once)."""
    return lambda obj: None if dropped(obj) else slim_run_object(kind, obj)


#: ended runs remembered, so that late events of their objects do not bring them back
CLOSED_KEPT = 50_000


def _slim(obj: Obj) -> Obj:
    """The object without what no reader of the caches needs: the API server's field-ownership
    bookkeeping (`managedFields`, a third of a watched pod's size)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


#: What the reconciler reads of a run's Job or pod (reconciler.run.observe and
#: reconciler.effects.reads), and nothing else: a plan of 20,000 steps keeps 40,000 of them while
#: they run. Whole, a pod costs ~10 KB and a Job ~7.5 KB held (docs/performance.md, "At scale"),
#: mostly fields no reader looks at (volumes, env, images, every condition, the kubelet's
#: bookkeeping). The dicts are built anew with literal keys, so every object shares the key strings.
_RUN_META = (
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "resourceVersion",
)
#: the labels and annotations observe reads (the attempt's step and number, the Plan and run
#: that RunObjects files it under; manifests.full_value: a shortened label's full value)
_OURS = KEY_PREFIX
#: a Job's conditions that settle its attempt; a pod's that say why it is taken away
_JOB_CONDITIONS = ("Complete", "Failed")
_POD_CONDITIONS = ("DisruptionTarget",)
_CONDITION_FIELDS = ("type", "status", "reason", "message", "lastTransitionTime")
_TERMINATED_FIELDS = ("exitCode", "signal", "reason", "message", "finishedAt")
_WAITING_FIELDS = ("reason", "message")


def _shared(value: Any) -> Any:
    """One string object for every copy of a short text: the values many of a run's objects
    repeat (its namespace, Plan and run labels, the Plan's UID in each Job's owner reference,
    a Job's UID in its pod's, condition types, reasons and messages) are decoded anew from each
    watch event, ~70-100 bytes each time."""
    return sys.intern(value) if isinstance(value, str) and len(value) <= 256 else value


def _pick(obj: Any, fields: tuple[str, ...], shared: tuple[str, ...] = ()) -> Obj:
    """The `fields` of `obj` it has (none when it is not an object); `shared` ones interned."""
    if not isinstance(obj, dict):
        return {}
    return {k: _shared(obj[k]) if k in shared else obj[k] for k in fields if k in obj}


def _same_or_dropped(value: Any, slim: Any) -> Any:
    """`slim` for a well-formed `value`; a value of the wrong type as it was (observe reads
    it as absent, and must read the slim object the same way)."""
    return slim if isinstance(value, dict) else value


def _conditions(status: Obj, kinds: tuple[str, ...]) -> list[Any]:
    found = status.get("conditions")
    if not isinstance(found, list):
        return []
    return [
        _pick(c, _CONDITION_FIELDS, ("type", "status", "reason", "message"))
        for c in found
        if isinstance(c, dict) and c.get("type") in kinds and c.get("status") == "True"
    ]


def _first_container_state(status: Obj) -> list[Any]:
    """A pod's first container's state and name (observe reads only the first: a step has one,
    or a step that moves files the collector `collect`), and an empty entry for each other
    container (observe counts them: a pod of more than one is not settled by its first
    container alone)."""
    found = status.get("containerStatuses")
    if not isinstance(found, list) or not found:
        return []
    first = _container_state(found[0])
    if isinstance(first, dict) and isinstance(found[0], dict) and "name" in found[0]:
        first = {"name": _shared(found[0]["name"]), **first}  # `collect`: a pod moving files
    return [first, *({} for _ in found[1:])]


def _init_states(found: Any) -> Any:
    """A pod's init containers (a step's services; the step and its `fetch` in a pod that
    moves files, kube.files_pod) as observe reads them: each one's name, why it waits or how
    it ended (a list that is not one, or an entry that is not an object, as it was)."""
    if not isinstance(found, list):
        return found
    out: list[Any] = []
    for c in found:
        if not isinstance(c, dict):
            out.append(c)
            continue
        out.append({**_pick(c, ("name",), ("name",)), **_container_state(c)})
    return out


def _container_state(first: Any) -> Any:
    if not isinstance(first, dict):
        return first
    state = first.get("state")
    if not isinstance(state, dict):
        return {"state": state} if "state" in first else {}
    kept: Obj = {}
    if "terminated" in state:
        t = state["terminated"]
        kept["terminated"] = _same_or_dropped(t, _pick(t, _TERMINATED_FIELDS, ("reason",)))
    if "waiting" in state:
        w = state["waiting"]
        kept["waiting"] = _same_or_dropped(w, _pick(w, _WAITING_FIELDS))
    return {"state": kept}


def _controller(refs: Any) -> Any:
    """The controller reference alone (observe.controller_uid reads the first with
    `controller: true`); a value that is not a list as it was."""
    if not isinstance(refs, list):
        return refs
    for ref in refs:
        if isinstance(ref, dict) and ref.get("controller") is True:
            fields = ("apiVersion", "kind", "uid", "controller")
            return [_pick(ref, fields, fields)]
    return []


def _meta(meta: Obj) -> Obj:
    out = _pick(meta, _RUN_META, ("namespace", "uid"))
    labels = meta.get("labels")
    if "labels" in meta:
        out["labels"] = (
            {
                sys.intern(k): _shared(v)
                for k, v in labels.items()
                if isinstance(k, str) and k.startswith(_OURS)
            }
            if isinstance(labels, dict)
            else labels
        )
    notes = meta.get("annotations")
    if isinstance(notes, dict):
        ours = {k: v for k, v in notes.items() if isinstance(k, str) and k.startswith(_OURS)}
        if ours:
            out["annotations"] = ours
    elif "annotations" in meta:
        out["annotations"] = notes
    if "ownerReferences" in meta:
        out["ownerReferences"] = _controller(meta["ownerReferences"])
    return out


def _init_step(spec: Any) -> list[Obj] | None:
    """A pod that moves files (kube.files_pod): its init container `step`, by name, with its
    limits (observe names the step's memory limit, not the collector's)."""
    found = spec.get("initContainers") if isinstance(spec, dict) else None
    steps = (
        [c for c in found if isinstance(c, dict) and c.get("name") == "step"]
        if isinstance(found, list)
        else []
    )
    return [{"name": "step", **_limits({"containers": steps})[0]}] if steps else None


def _limits(spec: Any) -> list[Obj]:
    """The first container's resource limits (observe names the memory limit in an error)."""
    found = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(found, list) or not found:
        return []
    first = found[0]
    if not isinstance(first, dict):
        return [first]
    resources = first.get("resources")
    if not isinstance(resources, dict):
        return [{"resources": resources}] if "resources" in first else [{}]
    return [{"resources": {"limits": resources["limits"]}} if "limits" in resources else {}]


def slim_run_object(kind: str, obj: Obj) -> Obj:
    """A run's Job or pod as the cache keeps it: its identity, the conditions and container
    state an attempt's outcome is read from, and the few spec fields its error names (a Job's
    deadline and memory limit; a pod's node and deadline). Whatever is not the shape the API
    server writes is kept as it was, so that observe reads the slim object exactly as the whole
    one (a property test holds it to that)."""
    meta = obj.get("metadata")
    spec = obj.get("spec")
    status = obj.get("status")
    out: Obj = {"metadata": _meta(meta) if isinstance(meta, dict) else meta}
    if isinstance(status, dict):
        if kind == "job":
            kept: Obj = {"conditions": _conditions(status, _JOB_CONDITIONS)}
        else:
            kept = _pick(status, ("phase", "reason"), ("phase", "reason"))
            kept["conditions"] = _conditions(status, _POD_CONDITIONS)
            kept["containerStatuses"] = _first_container_state(status)
            if "initContainerStatuses" in status:  # services; a step moving files (observe)
                kept["initContainerStatuses"] = _init_states(status["initContainerStatuses"])
        out["status"] = kept
    elif "status" in obj:
        out["status"] = status
    if isinstance(spec, dict):
        if kind == "job":
            template = spec.get("template")
            inner = template.get("spec") if isinstance(template, dict) else None
            slim_spec: Obj = {"template": {"spec": {"containers": _limits(inner)}}}
            if (step := _init_step(inner)) is not None:
                slim_spec["template"]["spec"]["initContainers"] = step
        else:
            slim_spec = _pick(spec, ("nodeName",))
        if "activeDeadlineSeconds" in spec:
            slim_spec["activeDeadlineSeconds"] = spec["activeDeadlineSeconds"]
        out["spec"] = slim_spec
    elif "spec" in obj:
        out["spec"] = spec
    return out


def _revision(obj: Obj) -> int | None:
    """The object's resourceVersion as a number (an etcd revision, in practice), else None."""
    version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
    return int(version) if version.isdigit() else None


def _newer(new: Obj, old: Obj | None) -> bool:
    """Whether `new` is a later version than `old` (resourceVersions are etcd revisions in
    practice; one that is not a number is taken as newer, as a watch's order says)."""
    if old is None:
        return True
    a, b = _revision(new), _revision(old)
    return a is None or b is None or a >= b


class Group(Protocol):
    """The objects a WatchCache's index puts under one key, kept by the cache as they change:
    a dict of them by default (Members), or a structure its reader keeps in order as it goes
    (reconciler.queue.standing.Standing: a Capsule's queue)."""

    def put(self, key: tuple[str, str], obj: Obj) -> None: ...

    def pop(self, key: tuple[str, str]) -> None: ...

    def __len__(self) -> int: ...

    def values(self) -> list[Obj]: ...


class Members:
    """A group as a dict of its objects by (namespace, name)."""

    def __init__(self) -> None:
        self._objects: dict[tuple[str, str], Obj] = {}

    def put(self, key: tuple[str, str], obj: Obj) -> None:
        self._objects[key] = obj

    def pop(self, key: tuple[str, str]) -> None:
        self._objects.pop(key, None)

    def __len__(self) -> int:
        return len(self._objects)

    def values(self) -> list[Obj]:
        return list(self._objects.values())


class WatchCache:
    """Namespaced objects by (namespace, name), fed by watch events; with `index`, also grouped
    by the key it gives each object, if any (the Plans of one Capsule are read without a pass over
    every Plan of the cluster), each group a `group()` (Members unless told)."""

    def __init__(
        self,
        index: Callable[[Obj], tuple[str, str] | None] | None = None,
        group: Callable[[], Group] = Members,
    ) -> None:
        self._objects: dict[tuple[str, str], Obj] = {}
        self._index = index
        self._new_group = group
        self._groups: dict[tuple[str, str], Group] = {}

    def _drop(self, key: tuple[str, str]) -> None:
        old = self._objects.pop(key, None)
        if old is None or self._index is None:
            return
        group = self._index(old)
        members = self._groups.get(group) if group is not None else None
        if group is None or members is None:
            return
        members.pop(key)
        if not len(members):
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
                members = self._groups.get(group)
                if members is None:
                    members = self._groups[group] = self._new_group()
                members.put(key, kept)

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
        found = self._groups.get(key)
        return found.values() if found is not None else []

    def grouped(self, key: tuple[str, str]) -> Group | None:
        """The group the index keeps under `key` itself (an empty one when it holds nothing
        there), or None without an index. Not a copy: read it before the next await, since the
        watch changes it."""
        if self._index is None:
            return None
        found = self._groups.get(key)
        return found if found is not None else self._new_group()


RunKey = tuple[str, str, str]  # namespace, the Plan's label value, run id


class RunObjects:
    """The Jobs and pods of Plans' runs, by the labels a run's selector matches
    (`PlanRef.selector()`: the Plan's label value and the run id), fed by the watches the
    operator has anyway. The reconciler reads a run's objects from here instead of listing them,
    except when it cannot trust what it holds (see reconciler.effects.reads.Reads.objects)."""

    def __init__(self, plan_label: str, run_label: str) -> None:
        self._labels = (plan_label, run_label)
        self._objects: dict[str, dict[RunKey, dict[str, Obj]]] = {"job": {}, "pod": {}}
        self._where: dict[tuple[str, str, str], RunKey] = {}  # (kind, ns, name) -> its run
        self._closed: OrderedDict[RunKey, None] = OrderedDict()
        #: per run, which objects are a settled step's (settle): dropped, and not taken again
        self._settled: dict[RunKey, Callable[[Obj], bool]] = {}

    def _key(self, obj: Obj) -> RunKey | None:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        plan, run = labels.get(self._labels[0]), labels.get(self._labels[1])
        if not isinstance(plan, str) or not isinstance(run, str):
            return None
        return str(meta.get("namespace", "")), plan, run

    def seen(self, kind: str, event_type: str | None, obj: Obj, slim: bool = False) -> bool:
        """Keep what the event shows (`slim`: obj is slim_run_object's already, held as it is);
        whether it can be news to its run's reconcile: False for an object of a run that ended
        (close) or of a settled step (settle) that the cache did not hold, which no reconcile
        reads again."""
        meta = obj.get("metadata") or {}
        where = (kind, str(meta.get("namespace", "")), str(meta.get("name", "")))
        old_key = self._where.get(where)
        old = self._objects[kind].get(old_key, {}).get(where[2]) if old_key else None
        if event_type != "DELETED" and old is not None and not _newer(obj, old):
            return True  # an older version arriving late (the reconcile's to judge, as before)
        if old_key is not None:
            self._objects[kind][old_key].pop(where[2], None)
            if not self._objects[kind][old_key]:
                del self._objects[kind][old_key]
            del self._where[where]
        key = self._key(obj)
        if key is None:
            return True
        settled = self._settled.get(key)
        if key in self._closed or (settled is not None and settled(obj)):
            return old_key is not None  # an ended run's, a settled step's: never read again
        if event_type == "DELETED":
            return True
        kept = obj if slim else slim_run_object(kind, obj)
        self._objects[kind].setdefault(key, {})[where[2]] = kept
        self._where[where] = key
        return True

    def close(self, key: RunKey) -> None:
        """The run ended: a finished run is never reconciled again, so its objects leave the
        cache, and their later events (a Job's pods are updated after it completes, a TTL deletes
        them) are ignored. A new run has a new id."""
        for kind, runs in self._objects.items():
            for name in runs.pop(key, {}):
                self._where.pop((kind, key[0], name), None)
        self._settled.pop(key, None)
        self._closed[key] = None
        self._closed.move_to_end(key)
        while len(self._closed) > CLOSED_KEPT:
            self._closed.popitem(last=False)

    def settle(self, key: RunKey, settled: Callable[[Obj], bool]) -> None:
        """Drop the run's objects that `settled` says belong to a settled step, and ignore
        their later events (a Job is marked Complete after its pod succeeded; the pod is updated
        and deleted later still) by the same test, which replaces the last one given. The reader
        never reads a settled step's objects again, and a big run's would otherwise stay until
        it ends: 20,000 steps' Jobs and pods. A settled step is settled for the rest of its run
        (a retry of the Plan is a new run), so no later attempt of it is lost."""
        self._settled[key] = settled
        for kind, runs in self._objects.items():
            held = runs.get(key)
            if not held:
                continue
            for name in [name for name, obj in held.items() if settled(obj)]:
                del held[name]
                self._where.pop((kind, key[0], name), None)
            if not held:
                del runs[key]

    def absent(
        self,
        kind: str,
        namespace: str | None,
        present: set[tuple[str, str]],
        version: str | None = None,
    ) -> list[Obj]:
        """What the cache holds of `kind` in `namespace` (None: in all) that a list holding
        `present` (namespace, name) lacks: deleted while no watch ran (kube.informer); but
        not what is newer than the list's `version` (a Job the reconciler created while the
        list's pages came: the list's snapshot predates it, and the watch that follows the
        list tells its fate)."""
        listed = int(version) if version and version.isdigit() else None
        found = []
        for (k, ns, name), key in list(self._where.items()):
            if k != kind or namespace not in (None, ns) or (ns, name) in present:
                continue
            obj = self._objects[kind][key][name]
            held = _revision(obj)
            if listed is None or held is None or held <= listed:
                found.append(obj)
        return found

    def of(self, kind: str, key: RunKey) -> list[Obj]:
        return list(self._objects[kind].get(key, {}).values())

    def named(self, kind: str, namespace: str, name: str) -> Obj | None:
        """The object held under that name, whatever its run, or None."""
        key = self._where.get((kind, namespace, name))
        return self._objects[kind].get(key, {}).get(name) if key is not None else None

    def replace(self, kind: str, key: RunKey, objs: list[Obj]) -> None:
        """What a list of the run's objects showed (slim objects, held as they are: a big run's
        list is not copied again): what it does not hold is gone (a deletion the watch did not
        deliver); what it holds is kept unless the watch already brought a newer version while
        the list was on its way."""
        listed = {str((o.get("metadata") or {}).get("name", "")) for o in objs}
        for obj in self.of(kind, key):
            if str((obj.get("metadata") or {}).get("name", "")) not in listed:
                self.seen(kind, "DELETED", obj)
        for obj in objs:
            self.seen(kind, "ADDED", obj, slim=True)
