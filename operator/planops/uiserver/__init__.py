"""The chart's UI server (`ui.enabled`): the `kubectl plan ui` page for many users, each
authenticated by the cluster and served AS themselves (docs/operations.md, "The UI server")."""
