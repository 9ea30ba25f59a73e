"""The reconciler: executes the engine's decisions for Plans in a cluster (through planops.kube)."""
