"""GPU slots: which are free, which are warm, who holds which. Pure bookkeeping; time is passed in
(monotonic seconds), so it can be tested without waiting.

A slot is *cold* until a job first uses it; a cold slot costs `provision_delay_s` before the job
starts (like a node being created). After a job it stays *warm* for `idle_timeout_s`, and a job
that lands on it then starts at once; past that it is released and cold again. Warm slots are
handed out first, as a cluster would reuse an idle node before creating one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elasticityops.backends.local.gpus import SlotDevice


@dataclass(frozen=True)
class SlotView:
    index: int
    physical: int | None
    holder: str | None  # the invocation that has it
    warm: bool


@dataclass
class _Slot:
    device: SlotDevice
    holder: str | None = None
    idle_since: float | None = None  # None: never used (cold) or in use


class SlotPool:
    def __init__(self, devices: Sequence[SlotDevice], idle_timeout_s: float | None) -> None:
        self._slots = [_Slot(d) for d in devices]
        # 0 would make every slot cold the moment its job ends: read it as "never", like None.
        self._idle_timeout_s = idle_timeout_s if idle_timeout_s else None

    @property
    def total(self) -> int:
        return len(self._slots)

    def free(self) -> int:
        return sum(1 for s in self._slots if s.holder is None)

    def _warm(self, slot: _Slot, now: float) -> bool:
        if slot.holder is not None:
            return True
        if slot.idle_since is None:
            return False
        return self._idle_timeout_s is None or now - slot.idle_since < self._idle_timeout_s

    def take(self, holder: str, count: int, now: float) -> tuple[list[SlotDevice], bool] | None:
        """Give `holder` `count` free slots, warm ones first. Returns (devices, any_cold), or None
        when fewer than `count` are free (nothing is taken then)."""
        free = [s for s in self._slots if s.holder is None]
        if len(free) < count:
            return None
        # Warm first, then by index: stable and reuses what is already provisioned.
        free.sort(key=lambda s: (not self._warm(s, now), s.device.index))
        chosen = free[:count]
        cold = any(not self._warm(s, now) for s in chosen)
        for slot in chosen:
            slot.holder = holder
            slot.idle_since = None
        return [s.device for s in chosen], cold

    def claim(self, holder: str, indices: Sequence[int]) -> list[SlotDevice] | None:
        """After a restart: mark the slots an adopted job already runs on as held by it. None when
        one of them does not exist here or is held by another job (then nothing is claimed)."""
        by_index = {s.device.index: s for s in self._slots}
        chosen = [by_index.get(i) for i in indices]
        if any(s is None or s.holder not in (None, holder) for s in chosen):
            return None
        slots = [s for s in chosen if s is not None]
        for slot in slots:
            slot.holder = holder
            slot.idle_since = None
        return [s.device for s in slots]

    def release(self, holder: str, now: float) -> int:
        """Free every slot of `holder`; they stay warm for the idle timeout. Returns how many."""
        freed = 0
        for slot in self._slots:
            if slot.holder == holder:
                slot.holder = None
                slot.idle_since = now
                freed += 1
        return freed

    def view(self, now: float) -> list[SlotView]:
        return [
            SlotView(s.device.index, s.device.physical, s.holder, self._warm(s, now)) for s in self._slots
        ]
