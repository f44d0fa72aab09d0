"""GPU slots: which are free, which are warm, who holds which. Pure bookkeeping; time is passed in
(monotonic seconds), so it can be tested without waiting.

A slot is *cold* until a job first uses it; a cold slot costs `provision_delay_s` before the job
starts (like a node being created). After a job it stays *warm* for `idle_timeout_s`, and a job
that lands on it then starts at once; past that it is released and cold again. Warm slots are
handed out first, as a cluster would reuse an idle node before creating one.

Warm capacity (--headroom on the local backend): `keep_warm(k)` pins k free slots warm. A
pinned slot never goes cold while pinned; a cold one pinned starts provisioning at once (warm
`provision_delay_s` later), as a placeholder pulls in a node; a job that lands on a slot still
provisioning waits only the rest. A job takes a pinned slot like any warm one, and the next
`keep_warm` pins another."""

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
    pinned: bool = False  # held warm for the headroom controller
    warm_at: float | None = None  # pinned while cold: when its provisioning is done


class SlotPool:
    def __init__(
        self, devices: Sequence[SlotDevice], idle_timeout_s: float | None, provision_delay_s: float = 0.0
    ) -> None:
        self._slots = [_Slot(d) for d in devices]
        # 0 would make every slot cold the moment its job ends: read it as "never", like None.
        self._idle_timeout_s = idle_timeout_s if idle_timeout_s else None
        self.provision_delay_s = provision_delay_s

    @property
    def total(self) -> int:
        return len(self._slots)

    def free(self) -> int:
        return sum(1 for s in self._slots if s.holder is None)

    def _warm(self, slot: _Slot, now: float) -> bool:
        if slot.holder is not None:
            return True
        if slot.warm_at is not None:
            return now >= slot.warm_at
        if slot.idle_since is None:
            return False
        return slot.pinned or self._idle_timeout_s is None or now - slot.idle_since < self._idle_timeout_s

    def _delay(self, slot: _Slot, now: float) -> float:
        """Seconds before a job on this free slot can start: 0 when warm, the rest of its
        provisioning when pinned and on its way, the whole delay when cold."""
        if self._warm(slot, now):
            return 0.0
        if slot.warm_at is not None:
            return slot.warm_at - now
        return self.provision_delay_s

    def take(self, holder: str, count: int, now: float) -> tuple[list[SlotDevice], float] | None:
        """Give `holder` `count` free slots, the soonest ready first. Returns (devices, seconds
        before they are all ready), or None when fewer than `count` are free (nothing is taken
        then)."""
        free = [s for s in self._slots if s.holder is None]
        if len(free) < count:
            return None
        # Warm first, then on their way, then by index: stable, reuses what is provisioned.
        free.sort(key=lambda s: (self._delay(s, now), s.device.index))
        chosen = free[:count]
        delay = max(self._delay(s, now) for s in chosen)
        for slot in chosen:
            slot.holder = holder
            slot.idle_since = None
            slot.pinned = False
            slot.warm_at = None
        return [s.device for s in chosen], delay

    def keep_warm(self, count: int, now: float) -> None:
        """Pin `count` free slots warm (as many as are free): warm ones first, then cold ones,
        which start provisioning now; pins past `count` are dropped (their idle time starts)."""
        free = [s for s in self._slots if s.holder is None]
        free.sort(key=lambda s: (not s.pinned, self._delay(s, now), s.device.index))
        for i, slot in enumerate(free):
            if i < count:
                if not slot.pinned:
                    slot.pinned = True
                    if not self._warm(slot, now):
                        slot.warm_at = now + self.provision_delay_s
            elif slot.pinned:
                slot.pinned = False
                if self._warm(slot, now):
                    slot.idle_since = now  # its idle time starts; one still provisioning is cold
                slot.warm_at = None

    def warm_picture(self, now: float) -> tuple[int, int, int, tuple[float, ...]]:
        """(free warm slots, pinned slots still provisioning, pinned warm slots, seconds until
        each unpinned warm free slot goes cold, ascending)."""
        free = [s for s in self._slots if s.holder is None]
        warm = [s for s in free if self._warm(s, now)]
        provisioning = sum(1 for s in free if s.pinned and not self._warm(s, now))
        pinned_warm = sum(1 for s in warm if s.pinned)
        going = (
            ()
            if self._idle_timeout_s is None
            else tuple(
                sorted(
                    max(0.0, (now if s.idle_since is None else s.idle_since) + self._idle_timeout_s - now)
                    for s in warm
                    if not s.pinned
                )
            )
        )
        return len(warm), provisioning, pinned_warm, going

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
