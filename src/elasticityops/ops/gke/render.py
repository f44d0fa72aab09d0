"""`render_gke(GkeInputs) -> GkeRender`: check, size, then every file of the render; pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from elasticityops.ops.gke.checks import validate
from elasticityops.ops.gke.inputs import GkeInputs
from elasticityops.ops.gke.objects import compute_class, nap_config
from elasticityops.ops.gke.script import cluster_script
from elasticityops.ops.gke.sizing import GkeSizing, size, warnings_for
from elasticityops.ops.priorities import priority_class_manifests
from elasticityops.ops.yaml_docs import Document, Manifest, dump_documents


@dataclass(frozen=True)
class GkeRender:
    script: str
    files: dict[str, str]
    manifests: list[Manifest]
    nap_config: dict[str, Any]
    sizing: GkeSizing
    warnings: tuple[str, ...] = field(default_factory=tuple)


def render_gke(inputs: GkeInputs) -> GkeRender:
    validate(inputs)
    sizing = size(inputs)
    warnings = warnings_for(inputs, sizing)
    priority_classes = priority_class_manifests()
    klass = compute_class(inputs)
    nap = nap_config(inputs, sizing)
    files = {
        "create-cluster.sh": cluster_script(inputs, sizing, warnings),
        "nap-config.yaml": dump_documents(
            [Document(nap)],
            header=(
                "Node auto-provisioning limits, read by gcloud --autoprovisioning-config-file.\n"
                + "\n".join(sizing.rules[:2])
            ),
        ),
        "priorityclasses.yaml": dump_documents(
            [Document(m) for m in priority_classes],
            header=(
                "ElasticityOps PriorityClasses (kubectl apply -f). The placeholder at -10 is "
                "the\nautoscaler's expendable cutoff."
            ),
        ),
        "computeclass.yaml": dump_documents(
            [Document(klass)],
            header=(
                "GKE custom ComputeClass: rules are tried in order when the first has no "
                "capacity\n(stockout, quota). Needs a GKE version with ComputeClass support and NAP "
                "enabled."
            ),
        ),
    }
    return GkeRender(
        script=files["create-cluster.sh"],
        files=files,
        manifests=[*priority_classes, klass],
        nap_config=nap,
        sizing=sizing,
        warnings=warnings,
    )
