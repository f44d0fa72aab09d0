"""The arrival scheduler, on virtual time with a fake gateway."""

from __future__ import annotations

import asyncio

import pytest

from elasticityops.domain.clock import ManualClock
from elasticityops.rehearse.replay import Sent, replay


class FakeGateway:
    """Accepts an invocation after `latency` virtual seconds; refuses the indices in `refuse`."""

    def __init__(
        self, clock: ManualClock, latency: float = 0.0, refuse: frozenset[int] = frozenset()
    ) -> None:
        self.clock = clock
        self.latency = latency
        self.refuse = refuse
        self.sent_at: dict[int, float] = {}
        self.in_flight = 0
        self.most_in_flight = 0

    async def send(self, index: int) -> str:
        self.sent_at[index] = self.clock.monotonic()
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.latency:
                await self.clock.sleep(self.latency)
            if index in self.refuse:
                raise ConnectionError(f"refused {index}")
            return f"inv-{index}"
        finally:
            self.in_flight -= 1


def _run(clock: ManualClock, arrivals: list[float], gw: FakeGateway, **kw: object) -> list[Sent]:
    return asyncio.run(clock.run(replay(arrivals, gw.send, clock, **kw)))  # type: ignore[arg-type]


def test_each_request_goes_out_at_its_offset() -> None:
    clock = ManualClock()
    gw = FakeGateway(clock)
    arrivals = [0.0, 1.5, 1.5, 30.0, 95.25]
    sent = _run(clock, arrivals, gw, max_in_flight=4)
    assert [gw.sent_at[i] for i in range(5)] == pytest.approx(arrivals)
    assert [s.invocation_id for s in sent] == [f"inv-{i}" for i in range(5)]
    assert not any(s.late for s in sent)


def test_in_flight_is_bounded_and_the_lag_is_reported() -> None:
    clock = ManualClock()
    gw = FakeGateway(clock, latency=10.0)
    sent = _run(clock, [0.0] * 6, gw, max_in_flight=2)
    assert gw.most_in_flight == 2
    # Two at a time, each taking 10 s: the last pair leaves 20 s after its offset.
    assert sorted(s.lag_s for s in sent) == pytest.approx([0, 0, 10, 10, 20, 20])
    assert sum(s.late for s in sent) == 4


def test_a_failed_send_is_recorded_and_the_rest_go_on() -> None:
    clock = ManualClock()
    gw = FakeGateway(clock, refuse=frozenset({1}))
    sent = _run(clock, [0.0, 1.0, 2.0], gw, max_in_flight=8, failures=(ConnectionError,))
    assert [s.invocation_id for s in sent] == ["inv-0", None, "inv-2"]
    assert sent[1].error == "refused 1"


def test_an_unexpected_error_is_not_swallowed() -> None:
    clock = ManualClock()
    gw = FakeGateway(clock, refuse=frozenset({0}))
    with pytest.raises(ConnectionError):
        _run(clock, [0.0, 1.0], gw, max_in_flight=8)


def test_progress_sees_every_request() -> None:
    clock = ManualClock()
    seen: list[int] = []
    _run(clock, [0.0, 2.0, 4.0], FakeGateway(clock), max_in_flight=1, on_sent=lambda s: seen.append(s.index))
    assert seen == [0, 1, 2]
