"""The bounds of a stored planops object that the runtime counts with: a Plan's spec shares one
etcd object with its status, so the spec's room and its literal steps are bounded (the CRD states
them as maxItems; the reconciler sizes the status beside them), and so is the run history.

A module of numbers apart from the CRD generator (api.crd), which only `python -m planops.api.crd`
and the tests run: the reconciler and the operator's flags read the bounds here.
"""

from __future__ import annotations

#: a Plan's spec as stored JSON: its status (planops.reconciler.run.status) shares the one object
SPEC_BUDGET = 768 << 10
#: literal steps: as many of the smallest steps (~26 bytes) as SPEC_BUDGET holds
MAX_STEPS = 30_000
#: finally steps are cleanup and reporting: a few (the bound keeps the CRD's CEL cost small)
MAX_FINALLY_STEPS = 100
#: a step's dependsOn entries, as the API server bounds them
MAX_DEPENDS_ON = 256

#: earlier runs a Plan keeps in status.history by default (spec.historyLimit), and at most
HISTORY_LIMIT = 10
HISTORY_LIMIT_MAX = 50
#: status.history's entries at most: historyLimit's bound twice (runs waiting for the archive)
HISTORY_ENTRIES_MAX = 2 * HISTORY_LIMIT_MAX
