"""A Capsule's queue (concurrency.maxRunningPlans): who holds a slot, who waits, and the
admission of a run, decided one at a time per Capsule."""
