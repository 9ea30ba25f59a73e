"""The `kubectl-plan` command line."""
