"""A real local Kubernetes control plane with simulated GPU nodes (kwok), for tests and rehearsals.

Binaries are built from the Go module proxy (see `build`), processes are supervised by PID
(`procs`), GKE-like T4 nodes are plain Node objects (`nodes`) that kwok keeps alive, pods run
for the time their annotations say (`stages`), upstream's cluster-autoscaler (kwok provider)
adds and removes nodes (`kwok_provider`, `components`), and a simulated cloud (`cloud`,
`cloud_loop`, `node_stages`) makes each new node boot and install its GPU driver, or fail.
"""

from __future__ import annotations

from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig
from elasticityops.devcluster.errors import DevClusterError

__all__ = ["AutoscalerSettings", "ClusterConfig", "DevClusterError"]
