"""A real local Kubernetes control plane with simulated GPU nodes (kwok), for tests and rehearsals.

Binaries are built from the Go module proxy (see `build`), processes are supervised by PID
(`procs`), GKE-like T4 nodes are plain Node objects (`nodes`) that kwok keeps alive, pods run
for the time their annotations say (`stages`), and a node auto-provisioning emulator
(`autoscaler`, `autoscaler_loop`) adds and removes nodes like the cluster autoscaler would.
"""

from __future__ import annotations

from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig
from elasticityops.devcluster.errors import DevClusterError

__all__ = ["AutoscalerSettings", "ClusterConfig", "DevClusterError"]
