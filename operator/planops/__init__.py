"""planops: run Plans (DAGs of steps) locally or as Kubernetes Jobs under a kopf operator."""

__version__ = "0.1.0"
