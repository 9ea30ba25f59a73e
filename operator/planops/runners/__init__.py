"""Executors of the engine's decisions that need no cluster."""
