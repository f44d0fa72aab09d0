"""`render_elasticity(ElasticityInputs) -> ElasticityRender`: the files of the stack, their README and
the warnings, pure; the CLI writes them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from elasticityops.ops.elasticity.checks import validate
from elasticityops.ops.elasticity.inputs import ElasticityInputs
from elasticityops.ops.elasticity.manifests import (
    adapter_values,
    dcgm_exporter,
    deployment_patch,
    device_plugin_daemonset,
    device_plugin_values,
    hpa,
    pdb,
)
from elasticityops.ops.yaml_docs import Document, Manifest, dump_documents

GPU_UTIL_WARNING = (
    "GPU utilisation is the WRONG signal when one request saturates the GPU (one request per pod,\nas "
    "ElasticityOps jobs run): utilisation reads ~100% on the first request and the HPA climbs\nto "
    "maxReplicas and stays there. Then scale on queue depth per replica instead (requests\nwaiting / "
    "replicas, an External or Object metric from your queue), or let ElasticityOps run\none Job per "
    "request and size warm capacity with its headroom controller. Utilisation works\nwhen one pod batches "
    "many concurrent requests and utilisation grows with load."
)


@dataclass(frozen=True)
class ElasticityRender:
    files: dict[str, str]
    manifests: list[Manifest]
    device_plugin_values: dict[str, Any]
    adapter_values: dict[str, Any]
    deployment_patch: dict[str, Any]
    warnings: tuple[str, ...] = field(default_factory=tuple)


def warnings_for(inputs: ElasticityInputs) -> tuple[str, ...]:
    found: list[str] = []
    if inputs.concurrency == 1:
        found.append(
            "--concurrency 1: one request saturates the GPU, so GPU utilisation cannot tell 1 request from "
            "100; this HPA would sit at maxReplicas. Scale on queue depth per replica instead."
        )
    if inputs.scale_down_window_s < 60:
        found.append(
            f"scale-down window {inputs.scale_down_window_s} s: GPU pods take minutes to come back; "
            "flapping costs cold starts."
        )
    return tuple(found)


def _lines(*lines: str) -> str:
    return "\n".join(lines)


def render_elasticity(inputs: ElasticityInputs) -> ElasticityRender:
    validate(inputs)
    warnings = warnings_for(inputs)
    plugin_values = device_plugin_values(inputs)
    plugin_ds = device_plugin_daemonset(inputs)
    dcgm = dcgm_exporter(inputs)
    a_values = adapter_values(inputs)
    the_hpa = hpa(inputs)
    the_pdb = pdb(inputs)
    patch = deployment_patch(inputs)
    signal_note = GPU_UTIL_WARNING
    if warnings:
        signal_note += "\n\nWARNINGS for these inputs:\n" + "\n".join(f"! {w}" for w in warnings)
    ns, metric = inputs.namespace, inputs.metric_name
    files = {
        "device-plugin-values.yaml": dump_documents(
            [Document(plugin_values)],
            header=_lines(
                "NVIDIA device plugin, Helm values (only where GKE does not manage the plugin: GKE",
                "installs its own with gpu-driver-version; a second plugin fights it).",
                "  helm repo add nvidia https://nvidia.github.io/k8s-device-plugin",
                "  helm install nvidia-device-plugin nvidia/k8s-device-plugin -n kube-system \\",
                "    -f device-plugin-values.yaml",
                "`Failed to initialize NVML` or `no NVIDIA devices found` in its logs: the driver is",
                "missing or does not match the plugin; fix the driver first (eops doctor names it).",
            ),
        ),
        "device-plugin.yaml": dump_documents(
            [Document(plugin_ds)],
            header="The same device plugin as a plain DaemonSet (kubectl apply -f), where Helm is not used",
        ),
        "dcgm-exporter.yaml": dump_documents(
            [Document(m) for m in dcgm],
            header=_lines(
                "DCGM exporter: per-GPU metrics (DCGM_FI_DEV_GPU_UTIL, FB_USED, XID errors) labelled with",
                "the pod that holds the GPU. GKE 1.32.1+ can run a managed DCGM: use one or the other.",
            ),
        ),
        "prometheus-adapter-values.yaml": dump_documents(
            [Document(a_values)],
            header=_lines(
                "Prometheus Adapter, Helm values: exposes DCGM GPU utilisation per pod as the custom",
                f"metric {metric} (custom.metrics.k8s.io/v1beta1).",
                "  helm install prometheus-adapter prometheus-community/prometheus-adapter \\",
                f"    -n {inputs.monitoring_namespace} -f prometheus-adapter-values.yaml",
                "The rule maps exported_pod/exported_namespace, not pod/namespace: after a scrape those",
                "name the exporter pod, and an HPA on them reads <unknown>. Check with:",
                f"  kubectl get --raw '/apis/custom.metrics.k8s.io/v1beta1/namespaces/{ns}/pods/*/{metric}'",
            ),
        ),
        "hpa.yaml": dump_documents(
            [
                Document(
                    the_hpa,
                    comment=_lines(
                        f"Scale {inputs.deployment} on average GPU utilisation per pod "
                        f"(target {inputs.target_util}%).",
                        f"Scale-up waits {inputs.scale_up_window_s} s of sustained load, "
                        f"scale-down {inputs.scale_down_window_s} s",
                        "(HPA default 300 s): a GPU replica that goes away costs a cold node to bring back.",
                        "",
                        signal_note,
                    ),
                ),
                Document(
                    the_pdb,
                    comment=_lines(
                        "At most one replica down at a time for voluntary disruptions: node scale-down",
                        "drains respect it, so the autoscaler cannot empty several GPU nodes of this",
                        "service at once.",
                    ),
                ),
            ]
        ),
        "deployment-patch.yaml": dump_documents(
            [Document(patch)],
            header=_lines(
                f"kubectl -n {ns} patch deployment {inputs.deployment} --patch-file deployment-patch.yaml",
                f"terminationGracePeriodSeconds {inputs.grace_period_s}: the longest request plus the time",
                "to stop taking new ones (handle SIGTERM: fail readiness, finish in-flight work, exit).",
                "The cluster autoscaler honours it on scale-down up to 10 min (upstream",
                "max-graceful-termination-sec); spot reclaims give pods only ~15 s whatever it says.",
            ),
        ),
    }
    return ElasticityRender(
        files=files,
        manifests=[plugin_ds, *dcgm, the_hpa, the_pdb],
        device_plugin_values=plugin_values,
        adapter_values=a_values,
        deployment_patch=patch,
        warnings=warnings,
    )
