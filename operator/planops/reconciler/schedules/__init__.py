"""ScheduledPlans and ClusterScheduledPlans: when a run is due (engine.schedule), what a
reconcile of one decides, and its status."""
