"""PlanTriggers: a webhook receiver that starts Plans from templates, one per accepted delivery
(docs/triggers.md). `verify` authenticates deliveries, `cel` filters and maps them with a bounded
cost, `receiver` is the HTTP server, `main` its entry point (`planops-trigger-receiver`)."""
