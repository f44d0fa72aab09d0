"""Warm capacity on Kubernetes: the headroom controller's `WarmUnits`, as placeholder
Deployments or CapacityBuffers (warm_objects.py builds them), and the capacity picture of a
shape from the backend's GPU node view (gpu_nodes.py).

Objects are found by label, named by instance and shape, and written only when what they ask
for changes, so a restarted gateway adopts what it left and never doubles it."""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from typing import Any

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.gpu_nodes import GpuNodes, NodeState
from elasticityops.backends.kubernetes.labels import WARM_SHAPE_LABEL
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.warm_objects import (
    BUFFER_API,
    buffer_pod_template,
    capacity_buffer,
    placeholder_deployment,
    replicas_of,
    shape_key_of,
    shape_of,
    warm_name_of_key,
    warm_selector,
)
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import Conflict, NotFound
from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.headroom.traffic import ClusterPicture
from elasticityops.domain.headroom.warm_units import WarmShape

BUFFER_GROUP_PATH = f"/apis/{BUFFER_API}"


class KubernetesWarmUnits:
    def __init__(
        self,
        api: KubeApi,
        settings: KubernetesSettings,
        nodes: GpuNodes,
        clock: Clock,
        *,
        mechanism: str,
        reaction_s: float,
        scale_down_after_s: float,
    ) -> None:
        self.api = api
        self.settings = settings
        self.nodes = nodes
        self.clock = clock
        self.mechanism = mechanism
        self.reaction_s = reaction_s
        self.scale_down_after_s = scale_down_after_s
        ns = settings.namespace
        self._deployments = f"/apis/apps/v1/namespaces/{ns}/deployments"
        self._pods = f"/api/v1/namespaces/{ns}/pods"
        self._templates = f"/api/v1/namespaces/{ns}/podtemplates"
        self._buffers = f"/apis/{BUFFER_API}/namespaces/{ns}/capacitybuffers"
        self._written: dict[str, int] = {}  # shape key -> replicas the object asks for
        self._placed: dict[str, tuple[int, int, frozenset[str]]] = {}  # key -> running, pending, nodes

    @property
    def _collection(self) -> str:
        return self._buffers if self.mechanism == "buffer" else self._deployments

    def shape_of(self, spec: FunctionSpec) -> WarmShape:
        return shape_of(spec, self.settings)

    async def held(self) -> dict[str, int]:
        items, _ = await self.api.list(
            self._collection, {"labelSelector": warm_selector(self.settings.instance)}
        )
        for obj in items:
            key = shape_key_of(obj)
            if key is not None:
                self._written[key] = replicas_of(obj)
        return dict(self._written)

    async def hold(self, shape: WarmShape, units: int) -> None:
        if self._written.get(shape.key) != units:
            if self.mechanism == "buffer":
                await self._write_buffer(shape, units)
            else:
                await self._write(
                    self._deployments, placeholder_deployment(shape, units, self.settings), units
                )
            self._written[shape.key] = units
        if self.mechanism == "placeholders":
            await self._look_at_placeholders(shape)

    async def release_others(self, keep: Collection[str]) -> None:
        for key in [k for k in self._written if k not in keep]:
            name = warm_name_of_key(key, self.settings.instance)
            await self.api.delete(f"{self._collection}/{name}")
            if self.mechanism == "buffer":
                await self.api.delete(f"{self._templates}/{name}")
            del self._written[key]
            self._placed.pop(key, None)

    def picture(self, shape: WarmShape, units: int) -> ClusterPicture:
        now = self.clock.now().timestamp()
        nodes = self.nodes.of_type(shape.gpu_type, shape.gpu_count)
        free = [n for n in nodes if n.usable and not self.nodes.busy(n.name)]
        provisioning = sum(1 for n in nodes if not n.usable and not n.going)
        if self.mechanism == "placeholders":
            running, pending, held_on = self._placed.get(shape.key, (0, units, frozenset()))
            unheld = [n for n in free if n.name not in held_on]
        else:
            # A buffer's pods are virtual: the autoscaler keeps `units` of the free nodes for it,
            # and only those past them can go (the longest empty first).
            running = min(units, len(free))
            pending = units - running
            unheld = sorted(free, key=lambda n: _empty_since(n, now))[: len(free) - running]
        leaving = sorted(max(0.0, _empty_since(n, now) + self.scale_down_after_s - now) for n in unheld)
        measured = self.nodes.mean_provisioning_s()
        return ClusterPicture(
            free_nodes=len(free),
            provisioning_nodes=provisioning,
            placeholders_running=running,
            placeholders_pending=pending,
            scale_down_in_s=tuple(leaving),
            lead_time_s=None if measured is None else self.reaction_s + measured,
        )

    # --- writing ---------------------------------------------------------------------------

    async def _write(self, collection: str, body: dict[str, Any], units: int) -> None:
        name = body["metadata"]["name"]
        try:
            await self.api.create(collection, body)
        except Conflict:
            await self.api.patch(f"{collection}/{name}", {"spec": {"replicas": units}})

    async def _write_buffer(self, shape: WarmShape, units: int) -> None:
        template = buffer_pod_template(shape, self.settings)
        # The shape's template never changes: its name is its requests' hash.
        with contextlib.suppress(Conflict):
            await self.api.create(self._templates, template)
        await self._write(self._buffers, capacity_buffer(shape, units, self.settings), units)

    async def _look_at_placeholders(self, shape: WarmShape) -> None:
        """Where the shape's placeholder pods are: running on which nodes, how many waiting."""
        selector = f"{WARM_SHAPE_LABEL}={shape.key},{warm_selector(self.settings.instance)}"
        pods, _ = await self.api.list(self._pods, {"labelSelector": selector})
        running, pending, on = 0, 0, set()
        for pod in pods:
            if (pod.get("metadata") or {}).get("deletionTimestamp"):
                continue
            node = (pod.get("spec") or {}).get("nodeName")
            if node and (pod.get("status") or {}).get("phase") == "Running":
                running += 1
                on.add(str(node))
            else:
                pending += 1
        self._placed[shape.key] = (running, pending, frozenset(on))


def _empty_since(node: NodeState, now: float) -> float:
    return now if node.empty_since is None else node.empty_since


async def buffers_served(api: KubeApi) -> bool:
    """Whether the cluster serves CapacityBuffers (autoscaling.x-k8s.io/v1beta1)."""
    try:
        doc = await api.get(BUFFER_GROUP_PATH)
    except NotFound:
        return False
    return any(r.get("name") == "capacitybuffers" for r in doc.get("resources") or ())
