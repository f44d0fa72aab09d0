"""kwok configuration: our pod-completion stages and the controller options (pure, YAML text out).

Pod annotations (documented in docs/dev-cluster.md):
- `eops.dev/run-seconds`: how long the pod runs once Running (decimal seconds, e.g. "45").
- `eops.dev/exit-code`: the exit code of every container (integer; default 0). 0 gives phase
  Succeeded, anything else Failed with reason Error.
Pods owned by a Job without `eops.dev/run-seconds` run DEFAULT_RUN_SECONDS and exit with
`eops.dev/exit-code` (or 0), so unmodified Jobs finish. Other pods without the annotation (bare
pods, Deployment or placeholder pause pods) run until deleted.

Our pod-ready stage replaces kwok's stock pod/fast one (see _READY_TEMPLATE for why).
Pitfalls avoided (see kwok's stage docs): no jitter is set (a jitter <= the delay silently
becomes the delay); the run time is turned into an absolute end time computed from
`.status.startTime`, so a patch to a running pod does not restart it; the two completion
stages have exclusive selectors (kwok picks one matching stage at random).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import yaml

from elasticityops.devcluster.node_stages import DEFAULT_HEARTBEAT_SECONDS, node_stages
from elasticityops.devcluster.nodes import NODE_IP
from elasticityops.domain import invocation_annotations

# One spelling for the stages and the gateway, which checks these when an invocation sets them.
RUN_SECONDS_ANNOTATION = invocation_annotations.RUN_SECONDS
EXIT_CODE_ANNOTATION = invocation_annotations.EXIT_CODE
DEFAULT_RUN_SECONDS = 1.0

# gojq: absolute end time = startTime + run-seconds + 1; falls back to a relative Go duration.
# startTime is stored to the second (truncated), so the +1 makes the run last at least
# run-seconds (and less than run-seconds + 1): "runs at least N s" is what timeout tests need.
_END_TIME_JQ = (
    f'.metadata.annotations["{RUN_SECONDS_ANNOTATION}"] as $s'
    " | try (((.status.startTime | fromdateiso8601) + ($s | tonumber) + 1) | todateiso8601)"
    ' catch (($s | tostring) + "s")'
)

_COMPLETE_TEMPLATE = """\
{{ $now := Now }}
{{ $code := "0" }}
{{ with .metadata.annotations }}{{ with index . "EXIT_ANNOTATION" }}{{ $code = . }}{{ end }}{{ end }}
{{ $started := or .status.startTime $now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  reason: PodCompleted
  status: "False"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  reason: PodCompleted
  status: "False"
  type: ContainersReady
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: PodScheduled
containerStatuses:
{{ range $index, $item := .spec.containers }}
- image: {{ $item.image | Quote }}
  name: {{ $item.name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: {{ $code }}
      finishedAt: {{ $now | Quote }}
      reason: {{ if eq $code "0" }}Completed{{ else }}Error{{ end }}
      startedAt: {{ $started | Quote }}
{{ end }}
phase: {{ if eq $code "0" }}Succeeded{{ else }}Failed{{ end }}
""".replace("EXIT_ANNOTATION", EXIT_CODE_ANNOTATION)

# Our pod-ready replaces kwok's stock pod/fast one. The stock one allocates a pod IP each time
# it is applied; under load kwok sometimes applies it twice (a stale watch event), the second
# patch adds a second IP, the API server rejects it ("may specify no more than one IP for each
# IP family"), and the pod stays Running forever because its completion is never scheduled
# (seen at 4,000 pods: 4 stuck). This one is idempotent: no pod IP, and startTime is kept once set.
_READY_TEMPLATE = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
{{ with NodeIPWith .spec.nodeName }}
hostIP: {{ . | Quote }}
hostIPs:
- ip: {{ . | Quote }}
{{ end }}
phase: Running
startTime: {{ or .status.startTime $now | Quote }}
"""

# Stock stages that ours replace: dropped from the assembled stock file when rendering.
OVERRIDDEN_STOCK_STAGES = frozenset({"pod-ready"})


def ready_stage() -> dict[str, Any]:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "eops-pod-ready"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
                    {
                        "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
                        "operator": "NotIn",
                        "values": ["True"],
                    },
                ]
            },
            "next": {"statusTemplate": _READY_TEMPLATE},
        },
    }


_RUNNING_READY: list[dict[str, Any]] = [
    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
    {
        "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
        "operator": "In",
        "values": ["True"],
    },
]


def _stage(name: str, extra: list[dict[str, Any]], delay: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {"matchExpressions": [*_RUNNING_READY, *extra]},
            "delay": delay,
            "next": {
                "event": {"type": "Normal", "reason": "Completed", "message": "simulated run finished"},
                "statusTemplate": _COMPLETE_TEMPLATE,
            },
        },
    }


def completion_stages() -> list[dict[str, Any]]:
    """Two exclusive stages: annotated pods, and Job pods without the annotation."""
    annotated = _stage(
        "eops-pod-complete-annotated",
        [{"key": f'.metadata.annotations["{RUN_SECONDS_ANNOTATION}"]', "operator": "Exists"}],
        {
            "durationMilliseconds": int(DEFAULT_RUN_SECONDS * 1000),
            "durationFrom": {"expressionFrom": _END_TIME_JQ},
        },
    )
    job_default = _stage(
        "eops-pod-complete-job-default",
        [
            {"key": f'.metadata.annotations["{RUN_SECONDS_ANNOTATION}"]', "operator": "DoesNotExist"},
            {"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]},
        ],
        {"durationMilliseconds": int(DEFAULT_RUN_SECONDS * 1000)},
    )
    return [annotated, job_default]


def kwok_configuration(server_address: str, tls_cert: str, tls_key: str) -> dict[str, Any]:
    """Controller options; parallelism raised so thousands of pods move through their stages.
    No `nodeLeaseDurationSeconds`: kwok turns a 0 here into 40 s, so the lease duration is its
    `--node-lease-duration-seconds` flag alone (components.kwok).

    kwok's server stands in for every node's kubelet: the nodes give its port as theirs
    (`nodePort`), and it serves HTTPS, which the API server speaks to a kubelet (any
    certificate: it is started without --kubelet-certificate-authority)."""
    port = int(server_address.rsplit(":", 1)[1])
    return {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": {
            "cidr": "10.0.0.0/16",  # the default /24 has room for only 254 pod IPs
            "nodeIP": NODE_IP,
            "serverAddress": server_address,
            "nodePort": port,
            "tlsCertFile": tls_cert,
            "tlsPrivateKeyFile": tls_key,
            # Off unless said (kwok's own default applies to kwokctl's clusters only); pods/log
            # needs them. Profiling stays off.
            "enableDebuggingHandlers": True,
            "enableProfilingHandler": False,
            "manageNodesWithAnnotationSelector": "kwok.x-k8s.io/node=fake",
            "podPlayStageParallelism": 16,
            "nodePlayStageParallelism": 8,
            "nodeLeaseParallelism": 8,
        },
    }


SIMULATED_OUTPUT = (
    "[dev cluster] kwok simulated this container: no process ran, so it wrote no output of its own.",
    "[dev cluster] Its run time and exit code come from the pod's eops.dev/run-seconds and "
    "eops.dev/exit-code annotations (docs/dev-cluster.md).",
)


def simulated_output_log(at: datetime) -> str:
    """What every container of the dev cluster shows as its log, in the CRI log format kwok
    reads as a kubelet would (`TIME STREAM F LINE`, F: a full line)."""
    stamp = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return "".join(f"{stamp} stdout F {line}\n" for line in SIMULATED_OUTPUT)


def cluster_logs(logs_file: str) -> dict[str, Any]:
    """kwok serves the pod log API (through the API server, as a kubelet does) from this file
    for every container of every pod: with no selector, a ClusterLogs matches all."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterLogs",
        "metadata": {"name": "eops-simulated-output"},
        "spec": {"logs": [{"logsFile": logs_file}]},
    }


def render_kwok_config(
    stock_stages_yaml: str,
    server_address: str,
    tls: tuple[str, str],
    logs_file: str,
    heartbeat_seconds: int = DEFAULT_HEARTBEAT_SECONDS,
) -> str:
    """One multi-document config: options (`tls`: the server's certificate and key files), the
    pods' log, our pod stages, then the node stages (ours and the stock ones, see
    node_stages.py), then the stock pod stages we do not replace."""
    ours = [
        kwok_configuration(server_address, *tls),
        cluster_logs(logs_file),
        ready_stage(),
        *completion_stages(),
    ]
    stock = [
        doc
        for doc in yaml.safe_load_all(stock_stages_yaml)
        if doc and doc.get("metadata", {}).get("name") not in OVERRIDDEN_STOCK_STAGES
    ]
    nodes = [d for d in stock if d["spec"]["resourceRef"]["kind"] == "Node"]
    others = [d for d in stock if d["spec"]["resourceRef"]["kind"] != "Node"]
    return yaml.safe_dump_all(
        [*ours, *node_stages(nodes, heartbeat_seconds), *others], sort_keys=False, width=1000
    )
