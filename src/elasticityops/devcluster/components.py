"""Command lines of the control-plane components (pure: paths and ports in, argv out).

Everything binds 127.0.0.1 (each component's default is 0.0.0.0 or ":port"), serving
certificates of the controllers go to the state directory (their default cert dir is
/var/run/kubernetes), and client QPS limits are raised because the defaults (20/30 for the
controller-manager, 50/100 for the scheduler) throttle thousands of pods.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig
from elasticityops.devcluster.kueue_setup import MultiKueueManager
from elasticityops.devcluster.nodes import POOL_LABEL
from elasticityops.devcluster.paths import AutoscalerBuild, KueueBuild, Toolchain


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int
    autoscaler_metrics: int = 0  # the real cluster-autoscaler's --address (0: not started)
    kueue_webhook: int = 0  # Kueue's webhook server (0: Kueue not started)
    kueue_health: int = 0
    kueue_metrics: int = 0


@dataclass(frozen=True)
class Layout:
    """Files of one cluster inside its state directory."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def kwok_config(self) -> Path:
        return self.root / "kwok.yaml"

    @property
    def pod_output(self) -> Path:
        return self.root / "pod-output.log"

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def autoscaler_settings(self) -> Path:
        return self.root / "autoscaler.json"

    @property
    def cloud_status(self) -> Path:
        return self.root / "cloud-status.json"

    @property
    def certs(self) -> Path:
        return self.root / "serving-certs"

    @property
    def kueue(self) -> Path:
        """Kueue's configuration and the certificates its rotator writes for its webhooks."""
        return self.root / "kueue"


def etcd(tc: Toolchain, lay: Layout, p: Ports) -> list[str]:
    client, peer = f"http://127.0.0.1:{p.etcd_client}", f"http://127.0.0.1:{p.etcd_peer}"
    return [
        str(tc.binary("etcd")),
        "--name=eops-dev",
        f"--data-dir={lay.etcd_data}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=eops-dev={peer}",
        "--initial-cluster-state=new",
        "--unsafe-no-fsync=true",  # throw-away data: durability costs disk I/O the tests do not need
        "--quota-backend-bytes=8589934592",
        "--log-level=warn",
    ]


def kube_apiserver(tc: Toolchain, lay: Layout, p: Ports, cfg: ClusterConfig) -> list[str]:
    pki = lay.pki
    argv = [
        str(tc.binary("kube-apiserver")),
        f"--etcd-servers=http://127.0.0.1:{p.etcd_client}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={p.apiserver}",
        f"--cert-dir={lay.certs}",
        f"--tls-cert-file={pki / 'admin.crt'}",
        f"--tls-private-key-file={pki / 'admin.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki / 'admin.key'}",
        f"--service-account-signing-key-file={pki / 'admin.key'}",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--endpoint-reconciler-type=none",  # no real endpoints to advertise on 127.0.0.1
        "--authorization-mode=RBAC",
        # GKE adds the nvidia.com/gpu toleration to pods that request GPUs this way.
        "--enable-admission-plugins=ExtendedResourceToleration",
        "--allow-privileged=true",
        "--event-ttl=1h",
        # Reach "kubelets" (pods/log, exec) by the nodes' loopback InternalIP only: the default
        # order starts with Hostname, which sends a DNS query off the machine for a fake name.
        "--kubelet-preferred-address-types=InternalIP",
        f"--etcd-compaction-interval={cfg.etcd_compaction_s}s",
        f"--request-timeout={cfg.request_timeout_s}s",
    ]
    if cfg.uncached_watches:
        argv.append("--watch-cache-sizes=" + ",".join(f"{r}#0" for r in cfg.uncached_watches))
    if not cfg.apf_enabled:
        argv += [
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=0",
            "--max-mutating-requests-inflight=0",
        ]
    return argv


def node_monitor_grace(cfg: ClusterConfig) -> int:
    """Seconds without a heartbeat before a node turns Unknown: three heartbeats (with kwok's
    jitter) or, with leases, three lease renewals (a quarter of the lease each); at least 60."""
    beat = cfg.node_heartbeat_seconds * 11 // 10
    if cfg.node_lease_seconds:
        beat = min(beat, cfg.node_lease_seconds // 4)
    return max(3 * beat, 60)


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def kube_controller_manager(tc: Toolchain, lay: Layout, p: Ports, cfg: ClusterConfig) -> list[str]:
    kc = str(lay.kubeconfig)
    grace = node_monitor_grace(cfg)
    return [
        str(tc.binary("kube-controller-manager")),
        f"--kubeconfig={kc}",
        f"--authentication-kubeconfig={kc}",
        f"--authorization-kubeconfig={kc}",
        "--bind-address=127.0.0.1",
        f"--secure-port={p.controller_manager}",
        f"--cert-dir={lay.certs}",
        "--leader-elect=false",
        f"--kube-api-qps={_or(cfg.controller_manager_qps, cfg.api_qps)}",
        f"--kube-api-burst={_or(cfg.controller_manager_burst, cfg.api_burst)}",
        f"--concurrent-job-syncs={cfg.job_workers}",
        # Default controller set: job, ttl-after-finished, garbage-collector, pod-garbage-collector,
        # namespace, serviceaccount(-token), root-ca publisher, node-lifecycle, taint-eviction...
        "--controllers=*",
        f"--service-account-private-key-file={lay.pki / 'admin.key'}",
        f"--root-ca-file={lay.pki / 'ca.crt'}",
        f"--node-monitor-grace-period={grace}s",
        # A node kwok has not initialised yet counts as "never posted status"; the 1 min default
        # taints it unreachable when thousands of nodes are created at once on 2 cores.
        f"--node-startup-grace-period={max(grace, 600)}s",
    ]


def kube_scheduler(tc: Toolchain, lay: Layout, p: Ports, cfg: ClusterConfig) -> list[str]:
    kc = str(lay.kubeconfig)
    return [
        str(tc.binary("kube-scheduler")),
        f"--kubeconfig={kc}",
        f"--authentication-kubeconfig={kc}",
        f"--authorization-kubeconfig={kc}",
        "--bind-address=127.0.0.1",
        f"--secure-port={p.scheduler}",
        f"--cert-dir={lay.certs}",
        "--leader-elect=false",
        f"--kube-api-qps={cfg.api_qps}",
        f"--kube-api-burst={cfg.api_burst}",
    ]


def kwok(tc: Toolchain, lay: Layout, cfg: ClusterConfig) -> list[str]:
    # WARN: at INFO kwok logs one JSON line per node and pod patch, a real CPU cost at scale.
    return [
        str(tc.binary("kwok")),
        f"--kubeconfig={lay.kubeconfig}",
        f"--config={lay.kwok_config}",
        # A flag, not the config file: kwok turns a 0 in its config into 40 s; only the flag
        # turns leases off (0, the default: issue 14).
        f"--node-lease-duration-seconds={cfg.node_lease_seconds}",
        "--v=WARN",
    ]


def cloud(lay: Layout, server: str, kubelet_port: int) -> list[str]:
    """The simulated cloud (cloud_loop.py): node boot and driver delays, stockouts, the static pool."""
    return [
        sys.executable,
        "-m",
        "elasticityops.devcluster.cloud_loop",
        f"--server={server}",
        f"--pki-dir={lay.pki}",
        f"--settings={lay.autoscaler_settings}",
        f"--status={lay.cloud_status}",
        f"--kubelet-port={kubelet_port}",
    ]


# The namespace the real autoscaler runs "in": its kwok provider reads its ConfigMaps from
# POD_NAMESPACE, and its status ConfigMap goes to --namespace, kube-system as on GKE.
AUTOSCALER_NAMESPACE = "kube-system"


def _seconds(value: float) -> str:
    return f"{value:g}s"


def cluster_autoscaler(
    build: AutoscalerBuild, lay: Layout, p: Ports, cfg: ClusterConfig, s: AutoscalerSettings
) -> list[str]:
    """The real cluster-autoscaler with the kwok provider, its flags from the dev cluster's knobs.

    Deliberate choices: scale-down-delay-after-add follows scale-down-unneeded-time (upstream's
    defaults are 10 min both; a short window in tests would otherwise still wait 10 min after
    every scale-up); the priority expander first, which follows the ConfigMap
    `cluster-autoscaler-priority-expander` where one exists (none by default: a test or a user
    makes one to prefer a group) and passes every option on where none does, then least-waste,
    which needs no prices (the price expander needs a pricing model the kwok provider does not
    have); the GPU pod delay is upstream's fixed 30 s, not a knob. With `balance_zones` the zone
    groups of a GPU type count as similar: upstream's basic set ignores the zone label, and the
    pool label (each group's own name, which GKE's provider ignores too) is ignored here.
    """
    balance = (
        ["--balance-similar-node-groups=true", f"--balancing-ignore-label={POOL_LABEL}"]
        if s.balance_zones
        else []
    )
    return [
        str(build.binary),
        "--cloud-provider=kwok",
        f"--kubeconfig={lay.kubeconfig}",
        f"--namespace={AUTOSCALER_NAMESPACE}",
        f"--address=127.0.0.1:{p.autoscaler_metrics}",
        "--leader-elect=false",
        f"--kube-client-qps={cfg.api_qps}",
        f"--kube-client-burst={cfg.api_burst}",
        f"--scan-interval={_seconds(s.scan_interval)}",
        f"--max-nodes-total={s.max_nodes}",
        f"--scale-down-unneeded-time={_seconds(s.scale_down_after)}",
        f"--scale-down-delay-after-add={_seconds(s.scale_down_after)}",
        f"--max-scale-down-parallelism={s.max_scale_down_parallelism}",
        f"--max-node-provision-time={_seconds(s.max_node_provision_time)}",
        f"--max-node-startup-time={_seconds(s.max_node_provision_time)}",
        f"--expendable-pods-priority-cutoff={s.expendable_pods_priority_cutoff}",
        f"--initial-node-group-backoff-duration={_seconds(s.backoff_initial)}",
        f"--max-node-group-backoff-duration={_seconds(s.backoff_max)}",
        f"--max-nodes-per-scaleup={s.max_nodes_per_scaleup}",
        f"--max-nodegroup-binpacking-duration={_seconds(s.max_binpacking_s)}",
        *balance,
        "--expander=priority,least-waste",
        "--enable-provisioning-requests=true",
        "--capacity-buffer-controller-enabled=true",
        "--capacity-buffer-pod-injection-enabled=true",
        "--logtostderr=true",
        "--v=2",
    ]


def cluster_autoscaler_env(lay: Layout) -> dict[str, str]:
    # In local mode the kwok provider builds its own client from KUBECONFIG, not from --kubeconfig.
    env = dict(os.environ)
    env.update(
        KUBECONFIG=str(lay.kubeconfig),
        KWOK_PROVIDER_MODE="local",
        POD_NAMESPACE=AUTOSCALER_NAMESPACE,
    )
    return env


def kueue_env(manager: MultiKueueManager | None) -> dict[str, str] | None:
    """A MultiKueue manager's environment where it sets its clients' rate to the workers (the
    build patch reads it); None: the CLI's own."""
    extra = {} if manager is None else manager.env()
    return {**os.environ, **extra} if extra else None


def kueue(build: KueueBuild, lay: Layout) -> list[str]:
    """Kueue's manager with the configuration `kueue_setup.manager_config` wrote."""
    return [
        str(build.binary),
        f"--config={lay.kueue / 'config.yaml'}",
        f"--kubeconfig={lay.kubeconfig}",
        "--zap-log-level=info",
    ]
