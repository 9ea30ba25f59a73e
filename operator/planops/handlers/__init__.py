"""The operator: its assembly and what each watch event means (wiring.py, no kopf), the one
module that runs it under kopf (kopf_adapter.py), the admission webhook's judgement
(webhook.py) and the operator-wide settings (config.py)."""
