"""The one HTTP edge of webhooks: POST a signed message to a receiver, as an SSRF-safe client.

The host is resolved here, every address it resolves to is checked (domain/webhook_addresses.py),
and the request goes to the address that was checked: the URL's host is replaced by it, with
the Host header and TLS's server name (SNI, and the certificate's check) still the name given,
so a DNS answer that changes between the check and the connection (rebinding) cannot send it
elsewhere. No redirect is followed, no proxy from the environment is used, connect and read are
bounded, and at most MAX_RESPONSE_BYTES of the answer are read (and dropped)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Mapping

import httpx

from elasticityops.domain.webhook_addresses import Address, address_refusal, split_url
from elasticityops.domain.webhook_delivery import AttemptResult

MAX_RESPONSE_BYTES = 64 * 1024
USER_AGENT = "ElasticityOps-Webhooks/1"
# The timeouts bound each connect and each read; an answer that drips within them would hold its
# slot for days: a whole attempt ends after this many times the timeout.
ATTEMPT_DEADLINE_FACTOR = 3
_DEFAULT_PORTS = {"http": 80, "https": 443}


# Host name and port to every address it resolves to, in order (the system's resolver by default).
Resolver = Callable[[str, int], Awaitable[list[Address]]]


class WebhookSender:
    def __init__(
        self, *, allow_private: bool, timeout_s: float, concurrency: int, resolve: Resolver | None = None
    ) -> None:
        self._allow_private = allow_private
        self._resolve = resolve or system_resolve
        self._deadline_s = timeout_s * ATTEMPT_DEADLINE_FACTOR
        # No keep-alive: a pooled connection is keyed by the address, and one opened for a host
        # name (its TLS checked for that name) must not carry another name's request.
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s),
            follow_redirects=False,
            trust_env=False,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=0),
        )

    async def close(self) -> None:
        await self._client.aclose()

    async def send(self, url: str, body: bytes, headers: Mapping[str, str]) -> AttemptResult:
        split = split_url(url)
        if split is None:
            return AttemptResult(None, f"{url!r} is not a URL a request can go to")
        parts, host = split
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower(), 443)
        try:
            addresses = await self._resolve(host, port)
        except OSError as exc:
            return AttemptResult(None, f"could not resolve {host}: {exc}")
        if not self._allow_private:
            for address in addresses:
                kind = address_refusal(address)
                if kind is not None:
                    return AttemptResult(
                        None,
                        f"refused: {host} resolves to {address}, a {kind} address (webhooks go only "
                        "to public addresses unless the gateway runs with --webhook-allow-private)",
                    )
        # Each address that was checked, in the resolver's order, until one takes the connection.
        failure = AttemptResult(None, f"no address of {host} to connect to")
        for address in addresses:
            failure = await self._post(url, address, port, host, parts.netloc, body, headers)
            if (
                failure.status is not None
                or not failure.error
                or not failure.error.startswith("ConnectError")
            ):
                return failure
        return failure

    async def _post(
        self,
        url: str,
        address: Address,
        port: int,
        host: str,
        netloc: str,
        body: bytes,
        headers: Mapping[str, str],
    ) -> AttemptResult:
        """POST to `address`, the one checked, with the Host header and TLS server name of `host`."""
        target = httpx.URL(url).copy_with(host=str(address), port=port)
        extensions = {"sni_hostname": host} if target.scheme == "https" else {}
        request_headers = {**headers, "host": netloc.rpartition("@")[2], "user-agent": USER_AGENT}
        try:
            async with (
                asyncio.timeout(self._deadline_s),
                self._client.stream(
                    "POST", target, content=body, headers=request_headers, extensions=extensions
                ) as response,
            ):
                read = 0
                async for chunk in response.aiter_raw():
                    read += len(chunk)
                    if read >= MAX_RESPONSE_BYTES:
                        break
                return AttemptResult(response.status_code, _error_of(response.status_code))
        except TimeoutError:
            return AttemptResult(None, f"the attempt passed its deadline of {self._deadline_s:g} s")
        except httpx.HTTPError as exc:
            return AttemptResult(None, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def _error_of(status: int) -> str | None:
    if 200 <= status < 300:
        return None
    if 300 <= status < 400:
        return f"answered {status}, a redirect, which is not followed"
    return f"answered {status}"


async def system_resolve(host: str, port: int) -> list[Address]:
    """Every address `host` resolves to, in the resolver's order, without repeats."""
    literal: Address | None
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        return [literal]
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[Address] = []
    for family, *_, sockaddr in infos:
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        address = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
        if address not in found:
            found.append(address)
    if not found:
        raise OSError(f"no IPv4 or IPv6 address for {host}")
    return found
