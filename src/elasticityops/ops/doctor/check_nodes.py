"""Checks: GPU nodes, their allocatable GPUs, the device plugin and its logs."""

from __future__ import annotations

from elasticityops.backends.kubernetes.labels import ACCELERATOR_LABEL, GPU_RESOURCE
from elasticityops.ops.doctor.findings import Finding, Status, names
from elasticityops.ops.doctor.snapshot import ClusterSnapshot

NVML_MARKERS = ("Failed to initialize NVML", "no NVIDIA devices found", "could not load NVML library")
DRIVER_HINT = (
    "GKE: create GPU pools with --accelerator type=...,count=1,gpu-driver-version=latest, and for "
    "auto-provisioned pools let pods select cloud.google.com/gke-gpu-driver-version: latest; elsewhere "
    "install the NVIDIA driver and the device plugin (eops render elasticity)"
)


def check_gpu_nodes(s: ClusterSnapshot) -> list[Finding]:
    if "nodes" in s.unreadable:
        return [
            Finding(
                "gpu-nodes",
                Status.warn,
                f"could not list nodes: {s.unreadable['nodes']}",
                "grant get/list on nodes (cluster-wide) to this identity",
            )
        ]
    gpu_nodes = s.gpu_nodes
    if not gpu_nodes:
        return [
            Finding(
                "gpu-nodes",
                Status.warn,
                "no GPU nodes right now: every request waits for a node to be provisioned (minutes)",
                "fine if node auto-provisioning scales from zero; for usual traffic keep a baseline pool "
                "(eops render gke --baseline N)",
            )
        ]
    findings: list[Finding] = []
    not_ready = [n.name for n in gpu_nodes if not n.ready]
    if not_ready:
        findings.append(
            Finding(
                "gpu-nodes",
                Status.fail,
                f"{len(not_ready)} GPU node(s) not Ready: {names(not_ready)}",
                "kubectl describe node NAME (conditions, kubelet); GKE auto-repair replaces nodes NotReady "
                "for ~10 min",
            )
        )
    unlabelled = [n.name for n in gpu_nodes if n.gpu_capacity > 0 and ACCELERATOR_LABEL not in n.labels]
    if unlabelled:
        findings.append(
            Finding(
                "gpu-nodes",
                Status.warn,
                f"{len(unlabelled)} node(s) have GPUs but no {ACCELERATOR_LABEL} label: "
                f"{names(unlabelled)}; jobs that select it never land there",
                f"kubectl label node NAME {ACCELERATOR_LABEL}=nvidia-tesla-t4 (GKE sets it on GPU pools "
                "itself)",
            )
        )
    if not findings:
        zones = sorted({n.zone for n in gpu_nodes if n.zone})
        findings.append(
            Finding(
                "gpu-nodes",
                Status.passed,
                f"{len(gpu_nodes)} GPU node(s) Ready and labelled"
                + (f" in {', '.join(zones)}" if zones else ""),
            )
        )
    return findings


DRIVER_GRACE_S = 600.0
"""How long a freshly Ready GPU node may go without an allocatable GPU before doctor calls it
broken: GKE's driver installer and the device plugin take minutes on a new node."""


def check_gpu_allocatable(s: ClusterSnapshot) -> list[Finding]:
    gpu_nodes = [n for n in s.gpu_nodes if n.ready]
    if not gpu_nodes:
        return []
    without = [n for n in gpu_nodes if n.gpu_allocatable < 1]
    warming = [n.name for n in without if n.ready_for_s is not None and n.ready_for_s < DRIVER_GRACE_S]
    missing = [n.name for n in without if n.name not in warming]
    if warming and not missing:
        return [
            Finding(
                "gpu-allocatable",
                Status.info,
                f"{len(warming)} GPU node(s) Ready less than {DRIVER_GRACE_S / 60:.0f} min and still "
                f"installing the GPU driver: {names(warming)}; pods wait for them (normal on a new node)",
            )
        ]
    if missing:
        return [
            Finding(
                "gpu-allocatable",
                Status.fail,
                f"{len(missing)} GPU node(s) expose no allocatable {GPU_RESOURCE}: {names(missing)}; the "
                "driver is not installed or the device plugin is broken, and the autoscaler counts such a "
                "node as not started for up to 15 min",
                DRIVER_HINT,
            )
        ]
    return [
        Finding(
            "gpu-allocatable",
            Status.passed,
            f"{GPU_RESOURCE} allocatable on all {len(gpu_nodes)} Ready GPU node(s)",
        )
    ]


def check_device_plugin(s: ClusterSnapshot) -> list[Finding]:
    if "daemonsets" in s.unreadable:
        return [
            Finding(
                "device-plugin",
                Status.warn,
                f"could not list DaemonSets: {s.unreadable['daemonsets']}",
                "grant list on daemonsets.apps to this identity",
            )
        ]
    if not s.device_plugins:
        if not s.gpu_nodes:
            return [
                Finding(
                    "device-plugin",
                    Status.info,
                    "no GPU device plugin DaemonSet and no GPU nodes yet",
                    "GKE installs its plugin with the driver; elsewhere apply device-plugin.yaml from eops "
                    "render elasticity",
                )
            ]
        return [
            Finding(
                "device-plugin",
                Status.warn,
                "no NVIDIA device plugin DaemonSet found",
                "GKE installs nvidia-gpu-device-plugin when driver installation is on; elsewhere: eops "
                "render elasticity, then kubectl apply -f device-plugin.yaml",
            )
        ]
    findings: list[Finding] = []
    for ds in s.device_plugins:
        where = f"{ds.namespace}/{ds.name}"
        if ds.desired == 0 and s.gpu_nodes:
            findings.append(
                Finding(
                    "device-plugin",
                    Status.warn,
                    f"{where} schedules on no node although {len(s.gpu_nodes)} GPU node(s) exist",
                    "its node affinity or nodeSelector matches no GPU node label: fix the label in its "
                    "affinity (eops render elasticity --gpu-node-label)",
                )
            )
        elif ds.ready < ds.desired:
            findings.append(
                Finding(
                    "device-plugin",
                    Status.fail,
                    f"{where}: {ds.ready} of {ds.desired} pods ready; GPU nodes without a running plugin "
                    f"expose no {GPU_RESOURCE}",
                    f"kubectl -n {ds.namespace} get pods -o wide and read the failing pods' logs and events "
                    "(image pull, missing driver, tolerations)",
                )
            )
        else:
            findings.append(
                Finding("device-plugin", Status.passed, f"{where}: {ds.ready}/{ds.desired} ready")
            )
    return findings


def check_device_plugin_logs(s: ClusterSnapshot) -> list[Finding]:
    if "device-plugin-logs" in s.unreadable:
        return [
            Finding(
                "device-plugin-logs",
                Status.info,
                f"device plugin logs not read: {s.unreadable['device-plugin-logs']}",
                "kubectl logs on a plugin pod to look for NVML errors",
            )
        ]
    bad: dict[str, list[str]] = {}
    for log in s.device_plugin_logs:
        for marker in NVML_MARKERS:
            if marker.lower() in log.text.lower():
                bad.setdefault(marker, []).append(f"{log.pod} on {log.node or '?'}")
    if not bad:
        if not s.device_plugin_logs:
            return []
        return [
            Finding(
                "device-plugin-logs",
                Status.passed,
                f"no NVML errors in {len(s.device_plugin_logs)} device plugin log(s)",
            )
        ]
    return [
        Finding(
            "device-plugin-logs",
            Status.fail,
            f"device plugin says '{marker}' ({names(pods)}): the driver is missing or its version does not "
            "match the plugin",
            "install or upgrade the driver first ("
            + DRIVER_HINT
            + "), then pin a plugin version that supports it",
        )
        for marker, pods in bad.items()
    ]
