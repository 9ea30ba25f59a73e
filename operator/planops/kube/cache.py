"""Objects the operator watches anyway, kept as the watch last showed them, so that a reconcile
reads them without a request.

Only for objects whose staleness is harmless and announced: a Capsule changes rarely, and its
change wakes every Plan of its namespace (handlers.capsule_event), which reads it again from
here. A name the cache has not seen (the watch's first listing not yet through, or a Capsule
that does not exist) is read from the API server, so a missing entry never means "absent".
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def _newer(new: Obj, old: Obj | None) -> bool:
    """Whether `new` is a later version than `old` (resourceVersions are etcd revisions in
    practice; one that is not a number is taken as newer, as a watch's order says)."""
    if old is None:
        return True
    a = str((new.get("metadata") or {}).get("resourceVersion", ""))
    b = str((old.get("metadata") or {}).get("resourceVersion", ""))
    return not (a.isdigit() and b.isdigit()) or int(a) >= int(b)


class WatchCache:
    """Namespaced objects by (namespace, name), fed by watch events."""

    def __init__(self) -> None:
        self._objects: dict[tuple[str, str], Obj] = {}

    def seen(self, event_type: str | None, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        if event_type == "DELETED":
            self._objects.pop(key, None)
        elif _newer(obj, self._objects.get(key)):
            self._objects[key] = obj

    def get(self, namespace: str, name: str) -> Obj | None:
        """The object as last seen, or None when the cache has not seen it (ask the API)."""
        return self._objects.get((namespace, name))
