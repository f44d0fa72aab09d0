"""The chart's MultiKueue workers (`kueue.workers`): Go template lines, before the Deployment,
that refuse a worker named twice and compute what the deploy template reads of the list, as
`eops render deploy --kube-worker-secrets` computes it (backends/kubernetes/deploy.py:
KUBE_WORKERS and WORKER_SOURCES): each worker's `NAME=PATH` entry of EOPS_KUBE_WORKERS and its
Secret's key as a file of the kubeconfigs' projected volume. The values' schema refuses a worker
without a name or a Secret. A test holds `helm template` to `eops render deploy`. Pure text."""

from __future__ import annotations

import json

from elasticityops.backends.kubernetes.deploy import (
    KUBE_WORKERS_VAR,
    KUBECONFIG_KEY,
    WORKER_SOURCES_VAR,
    WORKERS,
    WORKERS_DIR,
)
from elasticityops.backends.kubernetes.template import Value


def workers_prelude() -> list[str]:
    twice = f"{WORKERS.path} names %s twice: name each worker once, as its MultiKueueCluster is named"
    key = f'default "{KUBECONFIG_KEY}" $worker.kubeconfigKey'
    item = f'dict "key" ({key}) "path" $worker.name'
    source = f'dict "secret" (dict "name" $worker.kubeconfigSecret "items" (list ({item})))'
    entry = f'printf "%s={WORKERS_DIR}/%s" $worker.name $worker.name'
    return [
        f"{{{{- {KUBE_WORKERS_VAR} := list }}}}",
        f"{{{{- {WORKER_SOURCES_VAR} := list }}}}",
        "{{- $workerNames := dict }}",
        f"{{{{- range $worker := {WORKERS.expression} }}}}",
        "{{- if hasKey $workerNames $worker.name }}",
        f"{{{{- fail (printf {json.dumps(twice)} $worker.name) }}}}",
        "{{- end }}",
        "{{- $_ := set $workerNames $worker.name true }}",
        f"{{{{- {KUBE_WORKERS_VAR} = append {KUBE_WORKERS_VAR} ({entry}) }}}}",
        f"{{{{- {WORKER_SOURCES_VAR} = append {WORKER_SOURCES_VAR} ({source}) }}}}",
        "{{- end }}",
    ]


PRELUDE_VALUES: tuple[Value, ...] = (WORKERS,)
"""What `workers_prelude` reads."""
