"""The sender, the one HTTP edge of webhooks, against a real receiver process: it connects to the
address it resolved and checked (never resolving the name again, so DNS rebinding cannot swap
it) with the Host header of the name, refuses a name when any of its addresses is not public,
and follows no redirect. The resolver is its seam: a name the system cannot resolve is the proof
that no second resolution happens."""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path

from elasticityops.domain.webhook_addresses import Address
from elasticityops.webhooks.sender import Resolver, WebhookSender
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
