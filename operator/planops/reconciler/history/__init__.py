"""A Plan's records and earlier runs: its PlanReport chunks, the runs a new run replaced
(status.history), and retention (a finished Plan's TTL, its Jobs' collection)."""
