"""The sender, the one HTTP edge of webhooks, against a real receiver process: it connects to the
address it resolved and checked (never resolving the name again, so DNS rebinding cannot swap
it) with the Host header of the name, refuses a name when any of its addresses is not public,
and follows no redirect. The resolver is its seam: a name the system cannot resolve is the proof
that no second resolution happens."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from pathlib import Path

from elasticityops.domain.webhook_addresses import Address
from elasticityops.webhooks.sender import ATTEMPT_DEADLINE_FACTOR, Resolver, WebhookSender
from helpers.server import free_port
from helpers.webhook_receiver import running_receiver


def resolving_to(*addresses: str, asked: list[str] | None = None) -> Resolver:
    async def resolve(host: str, port: int) -> list[Address]:
        if asked is not None:
            asked.append(host)
        return [ipaddress.ip_address(a) for a in addresses]

    return resolve


def test_it_connects_to_the_address_it_checked_with_the_names_host_header(tmp_path: Path) -> None:
    asked: list[str] = []

    async def send(port: int) -> tuple[int | None, str | None]:
        sender = WebhookSender(
            allow_private=True, timeout_s=5, concurrency=2, resolve=resolving_to("127.0.0.1", asked=asked)
        )
        try:
            result = await sender.send(f"http://rebind.invalid:{port}/hook", b"{}", {"webhook-id": "m1"})
        finally:
            await sender.close()
        return result.status, result.error

    with running_receiver(tmp_path / "got.jsonl", free_port()) as receiver:
        assert asyncio.run(send(receiver.port)) == (200, None)
        (request,) = receiver.requests()
    assert request["headers"]["host"] == f"rebind.invalid:{receiver.port}"
    assert request["headers"]["webhook-id"] == "m1"
    assert asked == ["rebind.invalid"], "resolved once, by the sender's own check"


def test_a_name_is_refused_when_any_of_its_addresses_is_not_public(tmp_path: Path) -> None:
    async def send(port: int) -> str | None:
        sender = WebhookSender(
            allow_private=False,
            timeout_s=5,
            concurrency=2,
            resolve=resolving_to("93.184.216.34", "127.0.0.1"),
        )
        try:
            result = await sender.send(f"http://mixed.invalid:{port}/hook", b"{}", {})
        finally:
            await sender.close()
        assert result.status is None
        return result.error

    with running_receiver(tmp_path / "got.jsonl", free_port()) as receiver:
        error = asyncio.run(send(receiver.port))
        assert receiver.requests() == []
    assert error is not None
    assert "mixed.invalid resolves to 127.0.0.1, a loopback address" in error


def test_a_redirect_is_a_failure_and_is_not_followed(tmp_path: Path) -> None:
    async def send(port: int) -> tuple[int | None, str | None]:
        sender = WebhookSender(allow_private=True, timeout_s=5, concurrency=2)
        try:
            result = await sender.send(f"http://127.0.0.1:{port}/hook", b"{}", {})
        finally:
            await sender.close()
        assert not result.delivered
        return result.status, result.error

    with running_receiver(tmp_path / "got.jsonl", free_port(), answer=302) as receiver:
        status, error = asyncio.run(send(receiver.port))
        assert [r["path"] for r in receiver.requests()] == ["/hook"], "nothing went to the Location"
    assert status == 302
    assert error is not None
    assert "redirect" in error


async def _timed_send(port: int, timeout_s: float) -> tuple[int | None, str | None, float]:
    sender = WebhookSender(allow_private=True, timeout_s=timeout_s, concurrency=2)
    started = time.monotonic()
    try:
        result = await sender.send(f"http://127.0.0.1:{port}/hook", b"{}", {})
    finally:
        await sender.close()
    return result.status, result.error, time.monotonic() - started


def test_an_answer_that_never_ends_is_read_no_further_than_the_bound(tmp_path: Path) -> None:
    with running_receiver(tmp_path / "got.jsonl", free_port(), drip=(16384, 0.05)) as receiver:
        status, error, took = asyncio.run(_timed_send(receiver.port, 5.0))
    assert (status, error) == (200, None)
    # MAX_RESPONSE_BYTES at 16 KiB per 0.05 s is about 0.2 s; the whole answer would be forever.
    assert took < 3.0, took


def test_an_attempt_ends_at_its_deadline_however_slowly_the_answer_drips(tmp_path: Path) -> None:
    # Each byte comes well within the read timeout, so only the attempt's own deadline ends it.
    with running_receiver(tmp_path / "got.jsonl", free_port(), drip=(64, 0.1)) as receiver:
        status, error, took = asyncio.run(_timed_send(receiver.port, 0.5))
    assert status is None
    assert error is not None
    assert "deadline" in error
    assert took < 0.5 * ATTEMPT_DEADLINE_FACTOR + 1.0, took
