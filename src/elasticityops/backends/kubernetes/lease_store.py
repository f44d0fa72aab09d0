"""The leader election's Lease on the API server (coordination.k8s.io/v1), behind the elector's
LeaseStore seam (ha/elector.py). The object is read and written whole; a write carries the
resourceVersion it was read at, so two replicas racing for it get one success and one 409
(Conflict, from api.py's translation)."""

from __future__ import annotations

from datetime import UTC, datetime

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.labels import MANAGED_BY, MANAGED_BY_LABEL
from elasticityops.backends.kubernetes.objects import KubeObject, parse_time
from elasticityops.domain.errors import NotFound
from elasticityops.domain.lease import LeaseRecord

API_VERSION = "coordination.k8s.io/v1"


def micro_time(at: datetime | None) -> str | None:
    """A metav1.MicroTime as the API server writes it: RFC 3339 in UTC with microseconds."""
    if at is None:
        return None
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_object(name: str, namespace: str, record: LeaseRecord) -> KubeObject:
    metadata: KubeObject = {"name": name, "namespace": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY}}
    if record.resource_version:
        metadata["resourceVersion"] = record.resource_version
    spec: KubeObject = {
        "holderIdentity": record.holder,
        "leaseDurationSeconds": record.lease_duration_s,
        "leaseTransitions": record.transitions,
    }
    for key, at in (("acquireTime", record.acquire_time), ("renewTime", record.renew_time)):
        text = micro_time(at)
        if text is not None:
            spec[key] = text
    return {"apiVersion": API_VERSION, "kind": "Lease", "metadata": metadata, "spec": spec}


def record_of(lease: KubeObject) -> LeaseRecord:
    """The record of a Lease as read; missing fields read as Kubernetes defaults them (a Lease
    made by hand may lack any of them)."""
    spec = lease.get("spec") or {}
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        lease_duration_s=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=parse_time(spec.get("acquireTime")),
        renew_time=parse_time(spec.get("renewTime")),
        transitions=int(spec.get("leaseTransitions") or 0),
        resource_version=str((lease.get("metadata") or {}).get("resourceVersion") or ""),
    )


class KubeLeaseStore:
    def __init__(self, api: KubeApi, namespace: str, name: str) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.path = f"{self.collection}/{name}"

    async def get(self) -> LeaseRecord | None:
        try:
            return record_of(await self.api.get(self.path))
        except NotFound:
            return None

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        body = lease_object(self.name, self.namespace, record)
        body["metadata"].pop("resourceVersion", None)
        return record_of(await self.api.create(self.collection, body))

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        return record_of(await self.api.replace(self.path, lease_object(self.name, self.namespace, record)))
