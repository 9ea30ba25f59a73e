"""A Plan's run and its life: what the run is, what was observed of it, the decision of each
reconcile (pure) and the run's status."""
