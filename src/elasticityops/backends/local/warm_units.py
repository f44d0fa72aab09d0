"""Warm capacity on the local backend: the headroom controller's `WarmUnits` as pinned warm
slots (slots.py `keep_warm`). Every shape draws on the one slot pool, so the units of all
shapes, in GPUs, are pinned together. Pins live in memory: a restarted gateway warms its slots
again (a local slot has nothing to adopt)."""

from __future__ import annotations

from collections.abc import Collection

from elasticityops.backends.local.backend import LocalBackend
from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.headroom.traffic import ClusterPicture
from elasticityops.domain.headroom.warm_units import WarmShape


class LocalWarmUnits:
    mechanism = "slots"

    def __init__(self, backend: LocalBackend) -> None:
        self.backend = backend
        self._units: dict[WarmShape, int] = {}

    def shape_of(self, spec: FunctionSpec) -> WarmShape:
        return WarmShape(spec.gpu.type, spec.gpu.count)

    async def held(self) -> dict[str, int]:
        return {}

    async def hold(self, shape: WarmShape, units: int) -> None:
        self._units[shape] = units
        self._pin()

    async def release_others(self, keep: Collection[str]) -> None:
        for shape in [s for s in self._units if s.key not in keep]:
            del self._units[shape]
        self._pin()

    def picture(self, shape: WarmShape, units: int) -> ClusterPicture:
        warm, provisioning, pinned_warm, going = self.backend.warm_picture()
        delay = self.backend.settings.slot_provision_delay_s
        # Slots are shared by all shapes: this shape's units get the pinned ones first.
        share = units * shape.gpu_count
        running = min(share, pinned_warm)
        return ClusterPicture(
            free_nodes=warm // shape.gpu_count,
            provisioning_nodes=provisioning // shape.gpu_count,
            placeholders_running=running // shape.gpu_count,
            placeholders_pending=max(0, units - running // shape.gpu_count),
            scale_down_in_s=going,
            lead_time_s=delay,
        )

    def _pin(self) -> None:
        self.backend.keep_warm(sum(units * shape.gpu_count for shape, units in self._units.items()))
