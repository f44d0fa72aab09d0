#!/usr/bin/env python3
"""How long it takes to decode the watch events of 4,000 pods, per Kubernetes client.

    .venv/bin/python bench/k8s_watch_decode.py [--pods 4000] [--repeat 5]

Each pod goes through the four events a GPU job's pod produces (ADDED pending, MODIFIED
scheduled, MODIFIED running, MODIFIED succeeded), written as the API server writes them (with
managedFields, conditions and a container status), so 16,000 watch lines for 4,000 pods. The
lines are decoded the way each client decodes them:

- eops: the backend's slim decoder (msgspec structs naming only the fields the observers read,
  back to dicts), alone and followed by observe_pod() (the whole hot path of the pod watch);
- orjson, msgspec (untyped), stdlib json: the decode alone into dicts;
- lightkube 1.x: its watch decoding (msgspec typed structs, lightkube.models Pod);
- kubernetes (official client; kubernetes_asyncio shares its generated models): json.loads then
  ApiClient deserialize into V1Pod, as its Watch does.

Prints the best of --repeat runs per decoder, as a JSON summary and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import orjson
import psutil

from elasticityops.backends.kubernetes.decode import decode_pod
from elasticityops.backends.kubernetes.observe import Progress, observe_pod

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def _ts(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_events(i: int) -> list[bytes]:
    inv = f"inv-01kb{i:022d}"
    name = f"eops-{inv}-x{i % 10000:04d}"
    meta: dict[str, Any] = {
        "name": name,
        "generateName": f"eops-{inv}-",
        "namespace": "elasticityops",
        "uid": f"5a1c0b9a-0000-4000-8000-{i:012d}",
        "resourceVersion": str(1000 + i * 4),
        "creationTimestamp": _ts(0),
        "labels": {
            "app.kubernetes.io/managed-by": "elasticityops",
            "elasticityops.dev/instance": "default",
            "elasticityops.dev/function": "embed-images",
            "elasticityops.dev/invocation": inv,
            "batch.kubernetes.io/controller-uid": f"7c1f0000-0000-4000-8000-{i:012d}",
            "batch.kubernetes.io/job-name": f"eops-{inv}",
            "controller-uid": f"7c1f0000-0000-4000-8000-{i:012d}",
            "job-name": f"eops-{inv}",
        },
        "annotations": {
            "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
            "elasticityops.dev/invocation-id": inv,
        },
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": f"eops-{inv}",
                "uid": f"7c1f0000-0000-4000-8000-{i:012d}",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "finalizers": ["batch.kubernetes.io/job-tracking"],
        "managedFields": [
            {
                "manager": "kube-controller-manager",
                "operation": "Update",
                "apiVersion": "v1",
                "time": _ts(0),
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:labels": {".": {}, "f:job-name": {}}, "f:ownerReferences": {".": {}}},
                    "f:spec": {"f:containers": {'k:{"name":"job"}': {".": {}, "f:image": {}}}},
                },
            },
            {
                "manager": "kwok",
                "operation": "Update",
                "apiVersion": "v1",
                "time": _ts(30),
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:phase": {}}},
                "subresource": "status",
            },
        ],
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "priorityClassName": "eops-normal",
        "priority": 1000,
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": False,
        "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "containers": [
            {
                "name": "job",
                "image": "us-docker.pkg.dev/acme/gpu/worker:1.4",
                "command": ["python", "worker.py"],
                "env": [
                    {"name": "EOPS_INVOCATION_ID", "value": inv},
                    {"name": "EOPS_PAYLOAD_PATH", "value": "/var/run/eops/payload"},
                    {"name": "EOPS_RESULT_PATH", "value": "/dev/termination-log"},
                ],
                "resources": {
                    "requests": {"cpu": "3520m", "memory": "11676Mi", "nvidia.com/gpu": "1"},
                    "limits": {"memory": "11676Mi", "nvidia.com/gpu": "1"},
                },
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "imagePullPolicy": "IfNotPresent",
                "volumeMounts": [{"name": "payload", "mountPath": "/var/run/eops", "readOnly": True}],
            }
        ],
        "volumes": [{"name": "payload", "secret": {"secretName": f"eops-{inv}", "defaultMode": 292}}],
    }
    node = f"gke-t4-{i:05d}"
    states = [
        (
            {
                "phase": "Pending",
                "qosClass": "Burstable",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "lastTransitionTime": _ts(1),
                        "message": "0/200 nodes are available: 200 Insufficient nvidia.com/gpu.",
                    }
                ],
            },
            None,
        ),
        (
            {
                "phase": "Pending",
                "qosClass": "Burstable",
                "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": _ts(30)}],
            },
            node,
        ),
        (
            {
                "phase": "Running",
                "hostIP": "10.0.0.1",
                "podIP": "10.4.0.2",
                "startTime": _ts(31),
                "qosClass": "Burstable",
                "conditions": [
                    {"type": t, "status": "True", "lastTransitionTime": _ts(31)}
                    for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
                ],
                "containerStatuses": [
                    {
                        "name": "job",
                        "image": "us-docker.pkg.dev/acme/gpu/worker:1.4",
                        "imageID": "docker-pullable://worker@sha256:ab12",
                        "ready": True,
                        "restartCount": 0,
                        "started": True,
                        "containerID": "containerd://0123456789abcdef",
                        "state": {"running": {"startedAt": _ts(32)}},
                    }
                ],
            },
            node,
        ),
        (
            {
                "phase": "Succeeded",
                "hostIP": "10.0.0.1",
                "podIP": "10.4.0.2",
                "startTime": _ts(31),
                "qosClass": "Burstable",
                "conditions": [
                    {
                        "type": t,
                        "status": "False" if t in ("Ready", "ContainersReady") else "True",
                        "lastTransitionTime": _ts(90),
                    }
                    for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
                ],
                "containerStatuses": [
                    {
                        "name": "job",
                        "image": "us-docker.pkg.dev/acme/gpu/worker:1.4",
                        "imageID": "docker-pullable://worker@sha256:ab12",
                        "ready": False,
                        "restartCount": 0,
                        "started": False,
                        "containerID": "containerd://0123456789abcdef",
                        "state": {
                            "terminated": {
                                "exitCode": 0,
                                "reason": "Completed",
                                "message": '{"embedding_dims": 512}',
                                "startedAt": _ts(32),
                                "finishedAt": _ts(90),
                            }
                        },
                    }
                ],
            },
            node,
        ),
    ]
    lines = []
    for n, (status, node_name) in enumerate(states):
        s = dict(spec)
        if node_name:
            s["nodeName"] = node_name
        m = {**meta, "resourceVersion": str(1000 + i * 4 + n)}
        pod = {"kind": "Pod", "apiVersion": "v1", "metadata": m, "spec": s, "status": status}
        lines.append(orjson.dumps({"type": "ADDED" if n == 0 else "MODIFIED", "object": pod}))
    return lines


def decode_eops(lines: list[bytes]) -> int:
    """The backend's own path: slim msgspec decode into dicts, then the pure observation."""
    progress: dict[str, Progress] = {}
    count = 0
    now = T0
    for line in lines:
        _, pod = decode_pod(line)
        inv = pod["metadata"]["labels"]["elasticityops.dev/invocation"]
        out, progress[inv] = observe_pod(pod, progress.get(inv, Progress()), now)
        count += len(out)
    return count


def decode_slim(lines: list[bytes]) -> int:
    return sum(len(decode_pod(line)[1]["metadata"]["name"]) > 0 for line in lines)


def decode_orjson(lines: list[bytes]) -> int:
    return sum(len(orjson.loads(line)["object"]["metadata"]["name"]) > 0 for line in lines)


def decode_stdlib(lines: list[bytes]) -> int:
    return sum(len(json.loads(line)["object"]["metadata"]["name"]) > 0 for line in lines)


def decode_msgspec(lines: list[bytes]) -> int:
    decode = msgspec.json.Decoder().decode
    return sum(len(decode(line)["object"]["metadata"]["name"]) > 0 for line in lines)


def decode_lightkube(lines: list[bytes]) -> int:
    from lightkube.core import decoders
    from lightkube.resources.core_v1 import Pod

    count = 0
    for line in lines:
        event = decoders.decode_watch_event(line)
        pod = decoders.decode_object(event.object, Pod)
        count += pod.metadata.name is not None
    return count


def decode_official(lines: list[bytes]) -> int:
    from kubernetes.client import ApiClient

    client = ApiClient()
    deserialize = client._ApiClient__deserialize  # what Watch.unmarshal_event calls
    count = 0
    for line in lines:
        event = json.loads(line)
        pod = deserialize(event["object"], "V1Pod")
        count += pod.metadata.name is not None
    return count


DECODERS: dict[str, Callable[[list[bytes]], int]] = {
    "eops: slim decode + observe_pod (the backend's whole pod-watch path)": decode_eops,
    "eops: slim decode alone (msgspec structs of the read fields -> dict)": decode_slim,
    "orjson -> dict": decode_orjson,
    "msgspec -> dict": decode_msgspec,
    "stdlib json -> dict": decode_stdlib,
    "lightkube 1.x (msgspec models)": decode_lightkube,
    "kubernetes official (V1Pod models)": decode_official,
}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    return f"{cpu}, {psutil.cpu_count()} cores, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default="", help="comma-separated substrings of decoder names")
    args = parser.parse_args()
    lines = [line for i in range(args.pods) for line in pod_events(i)]
    size = sum(len(line) for line in lines)
    results: dict[str, float] = {}
    for name, fn in DECODERS.items():
        if args.only and not any(word in name for word in args.only.split(",")):
            continue
        try:
            best = float("inf")
            for _ in range(args.repeat):
                start = time.perf_counter()
                fn(lines)
                best = min(best, time.perf_counter() - start)
            results[name] = best
        except ImportError as exc:
            print(f"skipping {name}: {exc}")
    summary = {
        "pods": args.pods,
        "events": len(lines),
        "mib": round(size / 2**20, 1),
        "machine": machine(),
        "seconds": {k: round(v, 4) for k, v in results.items()},
    }
    print(json.dumps(summary, indent=2))
    print(f"\n| decoder | {args.pods} pods ({len(lines)} events, {summary['mib']} MiB) | events/s |")
    print("|---|---|---|")
    for name, seconds in results.items():
        print(f"| {name} | {seconds * 1000:.0f} ms | {len(lines) / seconds:,.0f} |")


if __name__ == "__main__":
    main()
