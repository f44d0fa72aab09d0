"""HTTP to one API server over aiohttp: a pool for requests, a pool for long-lived streams.

Why aiohttp and not the httpx2 client lightkube ships with: a burst of 1,000 invocations spent
about three quarters of the gateway's CPU inside httpx2/httpcore/anyio/h11 (connection-pool
scans, an anyio timeout scope and TLS wrapper per read, h11 parsing of every watch chunk),
which on a 2-core machine beside the control plane held Job creation to a third of the API
server's ceiling (BENCHMARKS.md). aiohttp parses HTTP in C and reads TLS straight from the
event loop's transport.

Configuration and credentials still come from lightkube (kubeconfig, in-cluster service account,
exec plugins such as gke-gcloud-auth-plugin): its SSL context is used as it is, and its httpx
`Auth` flow is run here only to learn the Authorization header, again after a 401 (rotated
service-account tokens, expired exec tokens)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp
import httpx2

Params = Mapping[str, str | int]
TRANSPORT_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError)
"""What a dropped, refused or timed-out connection raises (worth retrying)."""


class CredentialsError(Exception):
    """The credentials flow failed (a token file gone, an exec plugin that exits non-zero or
    prints no token): the request was not sent."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    headers: Mapping[str, str]


class AuthHeader:
    """The Authorization header a lightkube/httpx `Auth` would set, cached until a 401."""

    def __init__(self, auth: httpx2.Auth | None, base_url: str) -> None:
        self._auth = auth
        self._base_url = base_url
        self._value: str | None = None
        self._lock = asyncio.Lock()

    async def value(self) -> str | None:
        if self._auth is None:
            return None
        if self._value is None:
            async with self._lock:
                if self._value is None:
                    self._value = await self._run_flow(after_401=False)
        return self._value

    async def refresh(self) -> str | None:
        """After a 401: ask the flow again (a token file is re-read, an exec plugin re-run)."""
        if self._auth is None:
            return None
        async with self._lock:
            self._value = await self._run_flow(after_401=True)
        return self._value

    async def _run_flow(self, after_401: bool) -> str | None:
        assert self._auth is not None
        request = httpx2.Request("GET", self._base_url)
        flow = self._auth.async_auth_flow(request)
        try:
            sent = await flow.__anext__()
            if after_401:
                # A static token's flow ends here: nothing to refresh, the same header again.
                with contextlib.suppress(StopAsyncIteration):
                    sent = await flow.asend(httpx2.Response(401, request=sent))
        except Exception as exc:  # lightkube's ConfigError, an exec plugin's bad JSON, an OSError
            raise CredentialsError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            await flow.aclose()
        return sent.headers.get("authorization")


class Transport:
    """Sends requests and opens streams; knows nothing of Kubernetes (api.py does)."""

    def __init__(
        self,
        base_url: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        auth: httpx2.Auth | None = None,
        connections: int = 32,
        stream_connections: int = 64,
        request_timeout: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self._auth = AuthHeader(auth, self.base_url)
        self.credential_refreshes = 0
        """Times a 401 made it ask for the credentials again (a rotated token file, re-read)."""
        self._connections = connections
        self._stream_connections = stream_connections
        self._timeout = aiohttp.ClientTimeout(total=request_timeout)
        # Made on first use, inside the event loop that will use them (aiohttp's rule).
        self._requests: aiohttp.ClientSession | None = None
        self._streams: aiohttp.ClientSession | None = None

    def _session(self, streams: bool) -> aiohttp.ClientSession:
        session = self._streams if streams else self._requests
        if session is None or session.closed:
            # Watches and log streams never share a pool with requests: a burst of creates must
            # not wait for a connection held by a stream that may idle for minutes.
            limit = self._stream_connections if streams else self._connections
            connector = aiohttp.TCPConnector(ssl=self._ssl, limit=limit, limit_per_host=0)
            session = aiohttp.ClientSession(
                connector=connector,
                timeout=self._timeout,
                # Bodies are read as sent, so ask for them uncompressed: aiohttp advertises
                # gzip/deflate even with auto_decompress off, and kube-apiserver then gzips every
                # answer over 128 KiB (a list of a few hundred pods), which reached orjson still
                # compressed.
                auto_decompress=False,
                headers={"Accept-Encoding": "identity"},
                trust_env=False,
                cookie_jar=aiohttp.DummyCookieJar(),  # the API server sets none; skip the jar's work
            )
            if streams:
                self._streams = session
            else:
                self._requests = session
        return session

    async def _headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        headers = dict(extra or {})
        value = await self._auth.value()
        if value is not None:
            headers["Authorization"] = value
        return headers

    async def send(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """One request and its whole answer. Raises one of TRANSPORT_ERRORS when the
        connection fails, CredentialsError when no credentials could be had."""
        answer = await self._send_once(method, path, params, content, headers)
        if answer.status == 401 and await self._refresh() is not None:
            answer = await self._send_once(method, path, params, content, headers)
        return answer

    async def _refresh(self) -> str | None:
        self.credential_refreshes += 1
        return await self._auth.refresh()

    async def _send_once(
        self,
        method: str,
        path: str,
        params: Params | None,
        content: bytes | None,
        headers: Mapping[str, str] | None,
    ) -> Answer:
        async with self._session(False).request(
            method,
            self.base_url + path,
            params=params,
            data=content,
            headers=await self._headers(headers),
        ) as response:
            body = await response.read()
            return Answer(response.status, body, response.headers)

    @asynccontextmanager
    async def stream(
        self, path: str, params: Params, read_timeout: float | None
    ) -> AsyncIterator[tuple[int, AsyncIterator[bytes], Mapping[str, str]]]:
        """(status, chunks as they arrive, headers) of a streamed GET."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._timeout.total, sock_read=read_timeout)
        for attempt in range(2):
            async with self._session(True).get(
                self.base_url + path, params=params, timeout=timeout, headers=await self._headers(None)
            ) as response:
                if response.status == 401 and attempt == 0 and await self._refresh() is not None:
                    continue
                yield response.status, response.content.iter_any(), response.headers
                return

    async def close(self) -> None:
        for session in (self._requests, self._streams):
            if session is not None and not session.closed:
                await session.close()
        self._requests = self._streams = None
