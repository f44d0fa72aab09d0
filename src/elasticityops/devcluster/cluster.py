"""Bring a dev cluster up and down; the handle tests and the CLI use.

`up` starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, the simulated
cloud (cloud_loop.py) and upstream's cluster-autoscaler (kwok provider), in that order,
each on 127.0.0.1 and a free port, waits for each to be ready, and records every PID in
`state.json` before waiting (so a failed start is still cleaned up by `down`). `down` stops
them by PID in reverse order.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import ssl
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.blocking import BlockingKubeApi
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.devcluster import components, procs
from elasticityops.devcluster.certs import generate_pki, write_kubeconfig
from elasticityops.devcluster.client import ADMIN_SETTINGS, Credentials, admin_api, probe_api, unverified_tls
from elasticityops.devcluster.components import Layout, Ports
from elasticityops.devcluster.config import RUNTIME_KNOBS, AutoscalerSettings, ClusterConfig
from elasticityops.devcluster.errors import DevClusterError, StartupError
from elasticityops.devcluster.install import (
    install_crds,
    install_kueue,
    install_kwok_provider_config,
    install_namespace,
    install_priority_classes,
)
from elasticityops.devcluster.kueue_setup import KueuePorts, manager_config, with_feature_gates
from elasticityops.devcluster.multikueue import read_record
from elasticityops.devcluster.nodes import ROLE_AUTOSCALED, ROLE_BASELINE, ROLE_LABEL, node_ready
from elasticityops.devcluster.paths import KueueBuild, Toolchain
from elasticityops.devcluster.procs import ProcessRecord
from elasticityops.devcluster.stages import render_kwok_config, simulated_output_log
from elasticityops.devcluster.stuck import REPLAYED_ANNOTATION, StuckPod, list_bound_pending, replayable
from elasticityops.domain.errors import EopsError, NotFound

StepFn = Callable[[str], None]
STATUS_CONFIGMAP = "cluster-autoscaler-status"
PAGE = 1000
"""Items per page when listing nodes (thousands of them in a scale run)."""


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True)
class ClusterState:
    """What `state.json` holds: enough to find and stop everything later."""

    state_dir: Path
    server: str
    ports: Ports
    toolchain: Path
    processes: tuple[ProcessRecord, ...]
    started_at: float

    def to_json(self) -> dict[str, Any]:
        return {
            "state_dir": str(self.state_dir),
            "server": self.server,
            "ports": vars(self.ports),
            "toolchain": str(self.toolchain),
            "processes": [p.to_json() for p in self.processes],
            "started_at": self.started_at,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterState:
        return cls(
            state_dir=Path(data["state_dir"]),
            server=str(data["server"]),
            ports=Ports(**data["ports"]),
            toolchain=Path(data["toolchain"]),
            processes=tuple(ProcessRecord.from_json(p) for p in data["processes"]),
            started_at=float(data["started_at"]),
        )


def _save(lay: Layout, state: ClusterState) -> None:
    tmp = lay.state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state.to_json(), indent=2))
    tmp.replace(lay.state_file)


def load_state(state_dir: Path) -> ClusterState | None:
    path = Layout(state_dir).state_file
    if not path.is_file():
        return None
    return ClusterState.from_json(json.loads(path.read_text()))


def _log_tail(path: str, chars: int = 2500) -> str:
    try:
        return Path(path).read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _wait(rec: ProcessRecord, probe: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not procs.is_alive(rec):
            raise StartupError(f"{rec.name} exited during start-up; log {rec.log}:\n{_log_tail(rec.log)}")
        if probe():
            return
        time.sleep(0.2)
    raise StartupError(f"{rec.name} not ready after {timeout:.0f}s; log {rec.log}:\n{_log_tail(rec.log)}")


def _prepared(cfg: ClusterConfig, tc: Toolchain, lay: Layout) -> AutoscalerSettings:
    """The state directory emptied of an old cluster's files, once it is sure one can start."""
    old = load_state(lay.root)
    if old is not None and any(procs.is_alive(p) for p in old.processes):
        raise DevClusterError(f"a dev cluster is already running in {lay.root}; run `eops dev-cluster down`")
    if read_record(lay.root) is not None:  # `down` would stop the set's clusters, not this one
        raise DevClusterError(
            f"a MultiKueue set is recorded in {lay.root}; run `eops dev-cluster down` first"
        )
    settings = cfg.autoscaler.validated()
    if settings.enabled and cfg.nodes and tc.autoscaler is None:
        raise DevClusterError(
            "the cluster-autoscaler is not built: run `eops dev-cluster build --require-autoscaler` "
            "(or start with --no-autoscaling for the static pool only)"
        )
    if cfg.kueue and tc.kueue is None:
        raise DevClusterError("Kueue is not built: run `eops dev-cluster build --kueue`")
    for sub in (lay.etcd_data, lay.certs, lay.logs, lay.pki, lay.kueue):
        shutil.rmtree(sub, ignore_errors=True)
    lay.root.mkdir(parents=True, exist_ok=True)
    lay.logs.mkdir()
    settings.write(lay.autoscaler_settings)
    lay.cloud_status.unlink(missing_ok=True)
    return settings


def _free_ports(kueue: bool) -> Ports:
    ports = Ports(*(procs.free_port() for _ in range(7)))
    if not kueue:
        return ports
    return replace(
        ports,
        kueue_webhook=procs.free_port(),
        kueue_health=procs.free_port(),
        kueue_metrics=procs.free_port(),
    )


def _install_kueue(
    api: BlockingKubeApi, build: KueueBuild, lay: Layout, ports: Ports, cfg: ClusterConfig
) -> None:
    """Kueue's configuration written, and what its manager needs before it starts installed."""
    kueue_ports = KueuePorts(ports.kueue_webhook, ports.kueue_health, ports.kueue_metrics)
    lay.kueue.mkdir()
    config = manager_config(
        kueue_ports,
        str(lay.kueue / "certs"),
        cfg.multikueue,
        cfg.pods_ready_timeout_s,
        dict(cfg.kueue_feature_gates),
    )
    timeout = cfg.startup_timeout
    (lay.kueue / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    pki = install_kueue(api, build, kueue_ports, timeout)
    # Where a pod would have the Secret mounted: the rotator waits for the files, then the
    # webhook server serves them.
    certs = lay.kueue / "certs"
    certs.mkdir(mode=0o700)
    for name, data in (("ca.crt", pki.ca_cert), ("tls.crt", pki.cert), ("tls.key", pki.key)):
        (certs / name).write_bytes(data)
    (certs / "tls.key").chmod(0o600)


# Ports are picked free (bound to port 0, then let go) and taken by the process a moment later;
# another cluster starting beside it (the test lanes, a MultiKueue set) can take one meanwhile.
_PORT_TAKEN = "address already in use"
_STARTS = 3


def up(cfg: ClusterConfig, tc: Toolchain, step: StepFn = _quiet) -> ClusterState:
    """Start a cluster in `cfg.state_dir` (which must not hold a running one); started again on
    fresh ports, up to `_STARTS` times, when a process found one of its ports taken meanwhile."""
    for start in range(1, _STARTS + 1):
        try:
            return _up_once(cfg, tc, step)
        except StartupError as exc:
            if _PORT_TAKEN not in str(exc) or start == _STARTS:
                raise
            step(f"a port was taken meanwhile ({exc.args[0].splitlines()[0]}): again on fresh ports")
    raise AssertionError("unreachable")  # the loop returns or raises


def _up_once(cfg: ClusterConfig, tc: Toolchain, step: StepFn) -> ClusterState:
    lay = Layout(cfg.state_dir.resolve())
    settings = _prepared(cfg, tc, lay)
    step("certificates")
    pki = generate_pki(lay.pki)
    ports = _free_ports(cfg.kueue)
    server = f"https://127.0.0.1:{ports.apiserver}"
    write_kubeconfig(lay.kubeconfig, server, pki)
    lay.pod_output.write_text(simulated_output_log(datetime.now(UTC)))
    lay.kwok_config.write_text(
        render_kwok_config(
            tc.stock_stages.read_text(),
            f"127.0.0.1:{ports.kwok}",
            (str(pki.admin_cert), str(pki.admin_key)),
            str(lay.pod_output),
            cfg.node_heartbeat_seconds,
        )
    )
    state = ClusterState(lay.root, server, ports, tc.root, (), time.time())
    creds = Credentials(server, pki.ca_cert, pki.admin_cert, pki.admin_key)

    def launch(
        name: str, argv: list[str], probe: Callable[[], bool], env: dict[str, str] | None = None
    ) -> None:
        nonlocal state
        step(name)
        rec = procs.start(name, argv, lay.logs / f"{name}.log", env)
        state = replace(state, processes=(*state.processes, rec))
        _save(lay, state)
        _wait(rec, probe, cfg.startup_timeout)

    try:
        with contextlib.ExitStack() as clients:

            def answers_200(
                base_url: str, path: str, tls: ssl.SSLContext | None = None
            ) -> Callable[[], bool]:
                probe = clients.enter_context(probe_api(base_url, tls))
                return lambda: probe.ok(path)

            launch(
                "etcd",
                components.etcd(tc, lay, ports),
                answers_200(f"http://127.0.0.1:{ports.etcd_client}", "/health"),
            )
            launch(
                "kube-apiserver",
                components.kube_apiserver(tc, lay, ports, cfg),
                answers_200(server, "/readyz", creds.ssl_context()),
            )
            # The controllers serve self-signed certificates; only their liveness is probed.
            launch(
                "kube-controller-manager",
                components.kube_controller_manager(tc, lay, ports, cfg),
                answers_200(f"https://127.0.0.1:{ports.controller_manager}", "/healthz", unverified_tls()),
            )
            if cfg.nodes:
                launch(
                    "kube-scheduler",
                    components.kube_scheduler(tc, lay, ports, cfg),
                    answers_200(f"https://127.0.0.1:{ports.scheduler}", "/healthz", unverified_tls()),
                )
                launch(
                    "kwok",
                    components.kwok(tc, lay, cfg),
                    answers_200(f"https://127.0.0.1:{ports.kwok}", "/healthz", unverified_tls()),
                )
                launch("cloud", components.cloud(lay, server, ports.kwok), lay.cloud_status.is_file)
            api = clients.enter_context(admin_api(creds))
            try:
                _wait_default_serviceaccount(api, cfg.startup_timeout)
                step("priority classes and the gateway's namespace")
                install_priority_classes(api)
                install_namespace(api, KubernetesSettings().namespace)
                if settings.enabled and cfg.nodes:
                    assert tc.autoscaler is not None
                    step("autoscaler CRDs and kwok provider config")
                    install_crds(api, tc.autoscaler.crd_dir, cfg.startup_timeout)
                    install_kwok_provider_config(
                        api, components.AUTOSCALER_NAMESPACE, settings.max_nodes, settings.region
                    )
                    launch(
                        "cluster-autoscaler",
                        components.cluster_autoscaler(tc.autoscaler, lay, ports, cfg, settings),
                        answers_200(f"http://127.0.0.1:{ports.autoscaler_metrics}", "/health-check"),
                        components.cluster_autoscaler_env(lay),
                    )
                if tc.kueue is not None and cfg.kueue:
                    step("Kueue: its CRDs, webhooks and certificate")
                    _install_kueue(api, tc.kueue, lay, ports, cfg)
                    launch(
                        "kueue",
                        components.kueue(tc.kueue, lay),
                        answers_200(f"http://127.0.0.1:{ports.kueue_health}", "/readyz"),
                        components.kueue_env(cfg.multikueue),
                    )
                if cfg.nodes:
                    step(f"baseline nodes ({settings.baseline})")
                    wait_for_nodes(
                        api,
                        ROLE_BASELINE,
                        settings.baseline,
                        timeout=cfg.startup_timeout + settings.baseline / 20,
                    )
            except EopsError as exc:  # the API server failed us: part of the start that failed
                raise StartupError(f"the cluster did not come up: {exc}") from None
    except BaseException:
        down(lay.root)
        raise
    step("ready")
    return state


def _wait_default_serviceaccount(api: BlockingKubeApi, timeout: float) -> None:
    # Pods are refused until the serviceaccount controller has created `default`.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if api.ok("/api/v1/namespaces/default/serviceaccounts/default"):
            return
        time.sleep(0.2)
    raise StartupError("the default service account did not appear")


def nodes_of(api: BlockingKubeApi, role: str) -> list[KubeObject]:
    """Every node of `role` (baseline or autoscaled), paged."""
    nodes, _ = api.list("/api/v1/nodes", {"labelSelector": f"{ROLE_LABEL}={role}"}, PAGE)
    return nodes


def count_ready_nodes(api: BlockingKubeApi, role: str) -> int:
    return sum(1 for n in nodes_of(api, role) if node_ready(n))


def wait_for_nodes(api: BlockingKubeApi, role: str, count: int, timeout: float) -> None:
    """Wait until exactly `count` nodes of `role` exist and are Ready.

    Ready is enough, also for nodes created Ready (the static pool): without node Leases kwok
    plays every pod of a node it manages, and lists a node's pods again when it takes the node
    on, so a pod bound before that starts then (kwok 0.8.0 controller.go, `initNodeLeaseController`
    with leases off; issue 14).
    """
    deadline = time.monotonic() + timeout
    seen = -1
    while time.monotonic() < deadline:
        nodes = nodes_of(api, role)
        seen = sum(1 for n in nodes if node_ready(n))
        if seen == count and len(nodes) == count:
            return
        # Listing thousands of nodes is itself load on the API server: poll less often then.
        time.sleep(max(0.5, count / 1000))
    raise StartupError(f"expected {count} Ready {role} nodes, saw {seen} after {timeout:.0f}s")


def down(state_dir: Path) -> list[str]:
    """Stop every recorded process by PID (reverse start order); return the names stopped."""
    lay = Layout(state_dir.resolve())
    state = load_state(lay.root)
    if state is None:
        return []
    stopped = []
    for rec in reversed(state.processes):
        if procs.is_alive(rec):
            procs.stop(rec)
            stopped.append(rec.name)
    lay.state_file.unlink(missing_ok=True)
    return stopped


class DevCluster:
    """A running dev cluster: what the pytest fixture yields and the CLI talks to."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.layout = Layout(state.state_dir)

    @classmethod
    def start(cls, cfg: ClusterConfig, tc: Toolchain, step: StepFn = _quiet) -> DevCluster:
        return cls(up(cfg, tc, step))

    @classmethod
    def attach(cls, state_dir: Path) -> DevCluster:
        state = load_state(state_dir.resolve())
        if state is None:
            raise DevClusterError(f"no dev cluster recorded in {state_dir}")
        return cls(state)

    # --- where things are -------------------------------------------------------------
    @property
    def server(self) -> str:
        return self.state.server

    @property
    def kubeconfig_path(self) -> Path:
        return self.layout.kubeconfig

    @property
    def state_dir(self) -> Path:
        return self.state.state_dir

    @property
    def credentials(self) -> Credentials:
        return Credentials.in_pki(self.server, self.layout.pki)

    def api(self) -> BlockingKubeApi:
        """The backend's JSON client, blocking, with admin rights (close it, or use it as a
        context manager); it raises the domain's errors (`Conflict`, `NotFound`, ...)."""
        return admin_api(self.credentials)

    def kubectl(
        self, *args: str, check: bool = True, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        argv = [
            str(Toolchain(self.state.toolchain).binary("kubectl")),
            f"--kubeconfig={self.kubeconfig_path}",
            *args,
        ]
        return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=timeout)

    # --- autoscaler knobs and node pools ----------------------------------------------
    @property
    def autoscaler_settings(self) -> AutoscalerSettings:
        return AutoscalerSettings.read(self.layout.autoscaler_settings)

    def configure_cloud(self, **knobs: Any) -> AutoscalerSettings:
        """Change the simulated cloud's knobs (`RUNTIME_KNOBS`: baseline, delays, stockout zones)
        on the running cluster; it applies them within a second. The autoscaler's own flags are
        fixed at `up`: asking to change one raises (down and up again instead)."""
        fixed = sorted(set(knobs) - RUNTIME_KNOBS)
        if fixed:
            raise DevClusterError(
                f"{', '.join(fixed)}: a flag of the running cluster-autoscaler, fixed at `up` "
                "(restarting it deletes every node it made); start another cluster instead"
            )
        new = replace(self.autoscaler_settings, **knobs).validated()
        new.write(self.layout.autoscaler_settings)
        return new

    def cloud_status(self) -> dict[str, Any]:
        """The simulated cloud's last second: node counts, stamps, stockouts, errors."""
        data: dict[str, Any] = json.loads(self.layout.cloud_status.read_text())
        return data

    @property
    def runs_autoscaler(self) -> bool:
        return any(p.name == "cluster-autoscaler" for p in self.state.processes)

    def autoscaler_status(self) -> str | None:
        """The cluster-autoscaler's own status text (ConfigMap kube-system/cluster-autoscaler-status,
        what `kubectl describe` shows on GKE); None before its first loop or without it."""
        if not self.runs_autoscaler:
            return None
        with self.api() as api:
            try:
                cm = api.get(
                    f"/api/v1/namespaces/{components.AUTOSCALER_NAMESPACE}/configmaps/{STATUS_CONFIGMAP}"
                )
            except NotFound:
                return None
        return str((cm.get("data") or {}).get("status", ""))

    def set_baseline(self, count: int, wait: bool = True, timeout: float = 120.0) -> None:
        """Resize the static pool; waits until exactly `count` baseline nodes are Ready."""
        self.configure_cloud(baseline=count)
        if wait:
            with self.api() as api:
                wait_for_nodes(api, ROLE_BASELINE, count, timeout)

    def add_baseline_nodes(self, count: int, wait: bool = True) -> None:
        self.set_baseline(self.autoscaler_settings.baseline + count, wait=wait)

    def remove_baseline_nodes(self, count: int, wait: bool = True) -> None:
        self.set_baseline(max(self.autoscaler_settings.baseline - count, 0), wait=wait)

    def node_counts(self) -> dict[str, int]:
        with self.api() as api:
            return {r: count_ready_nodes(api, r) for r in (ROLE_BASELINE, ROLE_AUTOSCALED)}

    def stuck_pods(self, bound_seconds: float) -> list[StuckPod]:
        """Pods bound to a Ready kwok-managed node and still Pending (nothing started) for more
        than `bound_seconds` (issue 14; see devcluster/stuck.py). Read-only: never re-kicks."""
        with self.api() as api:
            return [p for p in list_bound_pending(api) if p.seconds > bound_seconds]

    # --- lifecycle --------------------------------------------------------------------
    def restart_apiserver(self, down_s: float = 0.0, timeout: float = 60.0) -> float:
        """Stop the kube-apiserver (SIGTERM, as a rolling control-plane upgrade does), leave it
        down `down_s` seconds, start it again with the same flags, ports and certificates, and
        return once it answers /readyz: the seconds it was unreachable. etcd keeps the state, so
        clients see dropped connections and watches, then a server that resumes them (or
        answers 410 Gone for a resourceVersion it no longer has)."""
        with probe_api(self.server, self.credentials.ssl_context()) as probe:
            return self._restart("kube-apiserver", down_s, lambda: probe.ok("/readyz"), timeout)

    def restart_etcd(self, down_s: float = 0.0, timeout: float = 60.0) -> float:
        """Stop etcd (SIGTERM), leave it down `down_s` seconds, start it again on the same data
        dir and ports, and return once the API server answers /readyz again: the seconds from the
        stop until then. Meanwhile the API server is up and answers what needs etcd (writes,
        consistent reads) with 5xx errors or timeouts, as when a real cluster loses its etcd.
        Then the pods kwok may have dropped a stage of meanwhile are replayed (`replay_pods`)."""
        with probe_api(self.server, self.credentials.ssl_context()) as probe:
            took = self._restart("etcd", down_s, lambda: probe.ok("/readyz"), timeout)
        self.replay_pods()
        return took

    def restart_kueue(self, down_s: float = 0.0, timeout: float = 60.0) -> float:
        """Stop Kueue's controller manager (SIGTERM, as a rollout of its Deployment does), leave
        it down `down_s` seconds, start it again with the same flags and certificate, and return
        once it answers /readyz: the seconds it was away. Meanwhile the API server's calls to its
        webhooks fail, so a Job that names a queue is refused, and nothing is admitted."""
        with contextlib.ExitStack() as clients:
            return self._restart("kueue", down_s, self._readiness("kueue", clients), timeout)

    def set_kueue_feature_gates(self, gates: Mapping[str, bool], timeout: float = 60.0) -> float:
        """Set Kueue's feature gates `gates` (on top of those it runs with) and restart it, as a
        changed Deployment rolls out; the seconds it was away (0.0 when nothing changed)."""
        path = self.layout.kueue / "config.yaml"
        config = yaml.safe_load(path.read_text())
        changed = with_feature_gates(config, gates)
        if changed == config:
            return 0.0
        path.write_text(yaml.safe_dump(changed, sort_keys=False))
        return self.restart_kueue(timeout=timeout)

    def replay_pods(self) -> int:
        """Touch (annotate) every Pending or Running pod of a kwok-managed node so that kwok
        plays its stages again, and return how many. kwok 0.8.0 drops a stage whose write the
        API server answered with an error it does not retry (shouldRetry in its
        controllers/utils.go retries only refused connections, 503, 504 and 429; a 500, as
        while etcd is away, ends the stage), where a kubelet retries its status update until
        it lands. Our stages are safe to replay: a run ends at an absolute time
        (stages._END_TIME_JQ), so a running pod keeps its end and one past it finishes now."""
        with self.api() as api:
            nodes, _ = api.list("/api/v1/nodes")
            pods, _ = api.list("/api/v1/pods", {"fieldSelector": "spec.nodeName!="})
            touched = 0
            stamp = {"metadata": {"annotations": {REPLAYED_ANNOTATION: str(time.time())}}}
            for namespace, name in replayable(pods, nodes):
                with contextlib.suppress(NotFound):  # ended and gone meanwhile
                    api.patch(f"/api/v1/namespaces/{namespace}/pods/{name}", stamp)
                    touched += 1
        return touched

    def compact_etcd(self) -> int:
        """Compact etcd at its current revision, as the API server's compactor does every
        --etcd-compaction-interval, but now: a watch served from etcd (ClusterConfig
        `uncached_watches`) that resumes from any earlier resourceVersion is answered 410 Gone.
        Returns the revision compacted at."""
        with BlockingKubeApi(
            KubeApi.at(f"http://127.0.0.1:{self.state.ports.etcd_client}", ADMIN_SETTINGS), name="etcd"
        ) as etcd:
            # etcd's JSON gateway: a range of one key answers with the store's current revision.
            revision = int(etcd.request("POST", "/v3/kv/range", body={"key": "AA=="})["header"]["revision"])
            etcd.request("POST", "/v3/kv/compaction", body={"revision": str(revision)})
        return revision

    def _restart(self, name: str, down_s: float, ready: Callable[[], bool], timeout: float) -> float:
        [rec] = [p for p in self.state.processes if p.name == name]
        stopped = time.monotonic()
        procs.stop(rec)
        time.sleep(down_s)
        fresh = procs.start(rec.name, list(rec.argv), Path(rec.log))
        self.state = replace(
            self.state, processes=tuple(fresh if p is rec else p for p in self.state.processes)
        )
        _save(self.layout, self.state)
        _wait(fresh, ready, timeout)
        return time.monotonic() - stopped

    def stop_processes(self) -> list[str]:
        """Stop every process by PID (reverse start order) and keep the rest: state, ports,
        certificates, etcd's data; `start_processes` brings the same cluster back. As a cluster
        whose machines are all switched off: clients get connections refused. Returns the names
        stopped."""
        stopped = []
        for rec in reversed(self.state.processes):
            if procs.is_alive(rec):
                procs.stop(rec)
                stopped.append(rec.name)
        return stopped

    def start_processes(self, timeout: float = 120.0) -> list[str]:
        """Start again, in their order, with the same command lines, every process that
        `stop_processes` stopped, each waited for as at `up`. Raises DevClusterError when one is
        still running (a half-stopped cluster is not restarted piecemeal)."""
        running = [rec.name for rec in self.state.processes if procs.is_alive(rec)]
        if running:
            raise DevClusterError(
                f"{', '.join(running)} still running in {self.state_dir}: stop the cluster first"
            )
        started = []
        with contextlib.ExitStack() as clients:
            for rec in self.state.processes:
                env = (
                    components.cluster_autoscaler_env(self.layout)
                    if rec.name == "cluster-autoscaler"
                    else None
                )
                fresh = procs.start(rec.name, list(rec.argv), Path(rec.log), env)
                self.state = replace(
                    self.state, processes=tuple(fresh if p is rec else p for p in self.state.processes)
                )
                _save(self.layout, self.state)
                probe = self._readiness(rec.name, clients)
                _wait(fresh, probe, timeout)
                started.append(rec.name)
        return started

    def _readiness(self, name: str, clients: contextlib.ExitStack) -> Callable[[], bool]:
        """What says the component `name` is ready again, as `up` waits for it."""
        ports = self.state.ports
        checks: dict[str, tuple[str, str, ssl.SSLContext | None]] = {
            "etcd": (f"http://127.0.0.1:{ports.etcd_client}", "/health", None),
            "kube-apiserver": (self.server, "/readyz", self.credentials.ssl_context()),
            "kube-controller-manager": (
                f"https://127.0.0.1:{ports.controller_manager}",
                "/healthz",
                unverified_tls(),
            ),
            "kube-scheduler": (f"https://127.0.0.1:{ports.scheduler}", "/healthz", unverified_tls()),
            "kwok": (f"https://127.0.0.1:{ports.kwok}", "/healthz", unverified_tls()),
            "cluster-autoscaler": (f"http://127.0.0.1:{ports.autoscaler_metrics}", "/health-check", None),
            "kueue": (f"http://127.0.0.1:{ports.kueue_health}", "/readyz", None),
        }
        if name not in checks:  # the simulated cloud: it writes its status every second
            return self.layout.cloud_status.is_file
        base, path, tls = checks[name]
        probe = clients.enter_context(probe_api(base, tls))
        return lambda: probe.ok(path)

    def processes_alive(self) -> dict[str, bool]:
        return {p.name: procs.is_alive(p) for p in self.state.processes}

    def stop(self) -> list[str]:
        return down(self.state.state_dir)
