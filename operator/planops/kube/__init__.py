"""The only package that talks to the Kubernetes API (client.py), and the shapes of what planops
creates there (manifests.py) and says there (events.py)."""
