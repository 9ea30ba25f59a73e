"""What a reconcile does: the intents a decision returns (pure), and the two modules that make
the requests, reads.py (what a reconcile reads) and actuator.py (what it does)."""
