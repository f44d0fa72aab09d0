"""Fast decoding of watch lines into the plain dicts the pure observers read.

A watch line carries the whole object: for a pod, its managedFields, its full spec (image, env,
volumes) and more, of which the observers read a dozen fields. msgspec structs that name only
those fields skip the rest while parsing, instead of building dicts for it, and `to_builtins`
turns the result back into the usual dict shape. bench/k8s_watch_decode.py measures it against
plain orjson and the client libraries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import orjson

from elasticityops.backends.kubernetes.objects import KubeObject

Decoder = Callable[[bytes], tuple[str, KubeObject]]


class _Meta(msgspec.Struct, omit_defaults=True):
    name: str = ""
    uid: str = ""
    resourceVersion: str = ""
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    # With deletionTimestamp, when the deletion was asked (a run stopped: worker_runs.py).
    deletionGracePeriodSeconds: int | None = None
    labels: dict[str, str] | None = None
    # A worker's pod waits on the gateway's finalizer until its log is kept (log_keeping.py).
    finalizers: list[str] | None = None


class _PodSpec(msgspec.Struct, omit_defaults=True):
    nodeName: str | None = None
    activeDeadlineSeconds: int | None = None  # a bare pod's timeout (the `pod` workload)


class _Pod(msgspec.Struct, omit_defaults=True):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _PodSpec = msgspec.field(default_factory=_PodSpec)
    status: dict[str, Any] | None = None


class _Container(msgspec.Struct, omit_defaults=True):
    name: str = ""
    resources: dict[str, Any] | None = None


class _TemplateSpec(msgspec.Struct, omit_defaults=True):
    containers: list[_Container] = msgspec.field(default_factory=list)


class _Template(msgspec.Struct, omit_defaults=True):
    spec: _TemplateSpec = msgspec.field(default_factory=_TemplateSpec)


class _JobSpec(msgspec.Struct, omit_defaults=True):
    activeDeadlineSeconds: int | None = None
    # Held by Kueue: the provisioning timeout waits for it to be let go (watching.py).
    suspend: bool | None = None
    template: _Template = msgspec.field(default_factory=_Template)


class _Job(msgspec.Struct, omit_defaults=True):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _JobSpec = msgspec.field(default_factory=_JobSpec)
    status: dict[str, Any] | None = None


class _Event(msgspec.Struct, omit_defaults=True):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    involvedObject: dict[str, Any] | None = None
    reason: str | None = None
    message: str | None = None
    firstTimestamp: str | None = None
    lastTimestamp: str | None = None
    eventTime: str | None = None


def _slim(struct: type[msgspec.Struct]) -> Decoder:
    line_type = msgspec.defstruct(f"{struct.__name__}Line", [("type", str), ("object", struct)])
    lines = msgspec.json.Decoder(line_type)

    def decode(line: bytes) -> tuple[str, KubeObject]:
        try:
            event: Any = lines.decode(line)
        except msgspec.ValidationError:
            # Not the expected kind: an ERROR line's Status object (410 Gone and friends).
            return decode_full(line)
        if event.type == "ERROR":
            return decode_full(line)
        obj: KubeObject = msgspec.to_builtins(event.object)
        return event.type, obj

    return decode


def decode_full(line: bytes) -> tuple[str, KubeObject]:
    """Any kind, every field (orjson)."""
    event = orjson.loads(line)
    return str(event.get("type")), event.get("object") or {}


decode_pod = _slim(_Pod)
decode_job = _slim(_Job)
decode_event = _slim(_Event)
