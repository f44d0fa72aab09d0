"""The one seam to the Kubernetes API: plain JSON dicts in and out over an async HTTP client.

The one client of the API server in ElasticityOps: the backend's, `eops doctor`'s, the dev
cluster's and the benches' (synchronous code drives it through blocking.py). Only the burst
bench's naive baseline uses another (the official `kubernetes` client: that is what it measures).

Configuration and authentication (kubeconfig, in-cluster service account, exec plugins) come
from lightkube's config loader; the requests themselves are sent by transport.py (aiohttp), so
the hot paths decode straight into dicts with orjson (see bench/k8s_watch_decode.py for why) and
every request passes the same rate limiter, retry loop and error translation. Client exceptions
stop here: callers only ever see the domain error tree."""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TypedDict, Unpack

import orjson
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import SERVICE_ACCOUNT, KubeConfig, SingleConfig
from lightkube.core.exceptions import ConfigError

from elasticityops.backends.kubernetes.decode import Decoder, decode_full
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.backends.kubernetes.ratelimit import TokenBucket, backoff_delay, parse_retry_after
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.transport import TRANSPORT_ERRORS, CredentialsError, Transport
from elasticityops.domain.clock import Clock, SystemClock
from elasticityops.domain.errors import (
    Conflict,
    EopsError,
    NotFound,
    PermanentError,
    TemporaryError,
)

Params = Mapping[str, str | int]


class RequestOptions(TypedDict, total=False):
    """What a request may carry besides its method and path (the blocking client passes them on)."""

    params: Params | None
    body: KubeObject | None
    content_type: str


_RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
_ACCEPT_JSON = {"Accept": JSON}
_JSON_HEADERS = {"Content-Type": JSON, "Accept": JSON}


class ResourceExpired(TemporaryError):
    """410 Gone: the resourceVersion a watch or paged list asked for is compacted away;
    list again from scratch."""


@dataclass(frozen=True)
class Failure:
    """A failed request, translated: the domain error, and the server's Retry-After if any."""

    error: EopsError
    retry_after: float | None = None


def translate_status(status: int, body: bytes, headers: Mapping[str, str], what: str) -> Failure:
    """Map an HTTP error answer of the API server to the domain error tree (the only place)."""
    message = ""
    reason = ""
    retry_after = parse_retry_after(headers.get("retry-after"))
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        doc = orjson.loads(body)
        message = str(doc.get("message") or "")
        reason = str(doc.get("reason") or "")
        details = doc.get("details") or {}
        if retry_after is None and details.get("retryAfterSeconds"):
            retry_after = float(details["retryAfterSeconds"])
    text = f"{what}: {status} {reason} {message}".strip()
    if status == 404:
        return Failure(NotFound(text))
    if status == 409:
        return Failure(Conflict(text))
    if status == 410:
        return Failure(ResourceExpired(text))
    if status in _RETRIED_STATUS:
        return Failure(TemporaryError(text, retry_after=retry_after or 1.0), retry_after)
    if status in (401, 403):
        return Failure(
            PermanentError(
                f"{text} (the gateway's service account lacks a permission: see `eops render deploy`)"
            )
        )
    return Failure(PermanentError(text))


def translate_transport(exc: Exception, what: str) -> Failure:
    """A dropped or refused connection or a timeout: worth retrying."""
    return Failure(TemporaryError(f"{what}: {type(exc).__name__}: {exc}".rstrip(": ")))


def translate_credentials(exc: CredentialsError, what: str) -> PermanentError:
    """The kubeconfig's credentials could not be had (token file, exec plugin): not sent."""
    return PermanentError(f"{what}: no credentials: {exc}")


def load_config(settings: KubernetesSettings) -> SingleConfig:
    """The kubeconfig file from the settings, else the pod's service account (in a cluster:
    its mounted token, $KUBERNETES_SERVICE_HOST and _PORT), else $KUBECONFIG / ~/.kube/config."""
    try:
        if settings.kubeconfig:
            config = KubeConfig.from_file(settings.kubeconfig)
        else:
            config = KubeConfig.from_env(service_account=settings.service_account_dir or SERVICE_ACCOUNT)
        single = config.get(context_name=settings.context)
    except KeyError as exc:
        if str(exc.args[0] if exc.args else "").startswith("KUBERNETES_SERVICE_"):
            mounted = settings.service_account_dir or SERVICE_ACCOUNT
            raise PermanentError(
                f"cannot load the Kubernetes configuration: a service account is mounted at "
                f"{mounted} but ${exc.args[0]} is not set (a pod has it); outside a cluster pass --kubeconfig"
            ) from None
        raise PermanentError(f"cannot load the Kubernetes configuration: {exc}") from None
    except (ConfigError, OSError, ValueError) as exc:
        raise PermanentError(f"cannot load the Kubernetes configuration: {exc}") from None
    if single is None:
        raise PermanentError(
            "the kubeconfig has no current context; pass --kubeconfig or set EOPS_KUBE_CONTEXT"
        )
    return single


class KubeApi:
    """Async JSON client of the API server with client-side rate limiting and retries."""

    def __init__(
        self,
        transport: Transport,
        settings: KubernetesSettings,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._transport = transport
        self._settings = settings
        self._clock = clock or SystemClock()
        self._bucket = TokenBucket(settings.qps, settings.burst, self._clock)
        self._inflight = asyncio.Semaphore(settings.concurrency)
        self._rng = rng or random.Random()
        self.requests = 0  # sent, retries included (for metrics and the benchmark)
        self.retries = 0
        self.errors: Counter[str] = Counter()
        """Error answers by status code ("429", "504", "410": in an answer or a watch's ERROR
        event) and failed connections ("connection"), retried or not: /metrics shows them."""

    @classmethod
    def connect(cls, settings: KubernetesSettings, clock: Clock | None = None) -> KubeApi:
        """A client of the cluster the settings' kubeconfig (or the pod's service account) names."""
        return cls.from_config(load_config(settings), settings, clock)

    @classmethod
    def from_config(
        cls, config: SingleConfig, settings: KubernetesSettings, clock: Clock | None = None
    ) -> KubeApi:
        """A client of the cluster of one loaded kubeconfig context (its namespace is the caller's)."""
        try:
            params = client_adapter.ConnectionParams(trust_env=False).httpx_params(config)
        except (ConfigError, OSError, ValueError, AssertionError) as exc:
            # A CA or client certificate file that is missing or unreadable, an unsupported
            # auth provider, a context without a user (lightkube asserts one).
            detail = str(exc)
            if isinstance(exc, OSError) and not exc.filename:  # ssl's errors name no file
                detail += " (reading a certificate or key file the kubeconfig names)"
            raise PermanentError(f"cannot use the Kubernetes configuration: {detail}") from None
        transport = Transport(
            params["base_url"],
            ssl_context=params["verify"],
            auth=params["auth"],
            connections=settings.concurrency,
            request_timeout=settings.request_timeout_seconds,
        )
        return cls(transport, settings, clock)

    @classmethod
    def at(
        cls,
        base_url: str,
        settings: KubernetesSettings,
        clock: Clock | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> KubeApi:
        """A client of a server that takes no bearer token: plain HTTP (tests, the dev cluster's
        etcd), or TLS with what `ssl_context` holds (a CA, a client certificate)."""
        transport = Transport(
            base_url,
            ssl_context=ssl_context,
            connections=settings.concurrency,
            request_timeout=settings.request_timeout_seconds,
        )
        return cls(transport, settings, clock)

    @property
    def credential_refreshes(self) -> int:
        """Times the API server refused the credentials (401) and they were asked for again."""
        return self._transport.credential_refreshes

    async def close(self) -> None:
        await self._transport.close()

    async def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> KubeObject:
        """Send one request, retrying 429 (after Retry-After), 5xx and dropped connections."""
        params, body = options.get("params"), options.get("body")
        content_type = options.get("content_type", JSON)
        what = f"{method} {path}"
        content = orjson.dumps(body) if body is not None else None
        if content is None:
            headers = _ACCEPT_JSON
        else:
            headers = (
                _JSON_HEADERS if content_type == JSON else {**_JSON_HEADERS, "Content-Type": content_type}
            )
        attempt = 0
        while True:
            await self._bucket.acquire()
            self.requests += 1
            try:
                async with self._inflight:
                    answer = await self._transport.send(
                        method, path, params=params, content=content, headers=headers
                    )
            except TRANSPORT_ERRORS as exc:
                self.errors["connection"] += 1
                failure = translate_transport(exc, what)
            except CredentialsError as exc:
                raise translate_credentials(exc, what) from None
            else:
                if answer.status < 400:
                    return _json(answer.body, what)
                self.errors[str(answer.status)] += 1
                failure = translate_status(answer.status, answer.body, answer.headers, what)
            error = failure.error
            if (
                not isinstance(error, TemporaryError)
                or isinstance(error, ResourceExpired)
                or attempt >= self._settings.max_retries
            ):
                raise error
            self.retries += 1
            await self._clock.sleep(
                backoff_delay(
                    attempt,
                    self._settings.retry_base_seconds,
                    self._settings.retry_cap_seconds,
                    failure.retry_after,
                    self._rng,
                )
            )
            attempt += 1

    async def create(self, path: str, body: KubeObject) -> KubeObject:
        return await self.request("POST", path, body=body)

    async def get(self, path: str, params: Params | None = None) -> KubeObject:
        """One object, or any other JSON document the server serves (/version, discovery)."""
        return await self.request("GET", path, params=params)

    async def replace(self, path: str, body: KubeObject) -> KubeObject:
        """PUT the whole object; with `metadata.resourceVersion` set, a Conflict (409) when the
        object has changed since (optimistic concurrency, as the Lease's holder needs)."""
        return await self.request("PUT", path, body=body)

    async def patch(self, path: str, body: KubeObject) -> KubeObject:
        """A JSON merge patch (RFC 7386): the fields in `body` replace the object's, null deletes."""
        return await self.request("PATCH", path, body=body, content_type=MERGE_PATCH)

    async def ok(self, path: str) -> bool:
        """Whether GET `path` answers 200 (readiness probes). Never retried, never raises: an
        error answer and a failed connection are both False."""
        await self._bucket.acquire()
        self.requests += 1
        try:
            async with self._inflight:
                answer = await self._transport.send("GET", path, headers=_ACCEPT_JSON)
        except (*TRANSPORT_ERRORS, CredentialsError):
            return False
        return answer.status == 200

    async def delete(self, path: str, propagation: str = "Background") -> bool:
        """Delete; False when it was already gone."""
        try:
            await self.request(
                "DELETE",
                path,
                body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation},
            )
        except NotFound:
            return False
        return True

    async def list(
        self, path: str, params: Params | None = None, page_size: int = 500
    ) -> tuple[list[KubeObject], str]:
        """All items (paged) and the list's resourceVersion, from which a watch can resume."""
        items: list[KubeObject] = []
        query: dict[str, str | int] = {**(params or {}), "limit": page_size}
        while True:
            doc = await self.request("GET", path, params=query)
            items.extend(doc.get("items") or [])
            meta = doc.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion", ""))
            query["continue"] = token

    async def watch(
        self, path: str, params: Params, decode: Decoder = decode_full
    ) -> AsyncIterator[tuple[str, KubeObject]]:
        """(type, object) pairs of one watch request until the server ends it.

        Raises ResourceExpired on 410 (in the answer or as an ERROR event), TemporaryError when
        the connection drops: the caller resumes or relists."""
        what = f"WATCH {path}"
        query: dict[str, str | int] = {
            **params,
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": self._settings.watch_timeout_seconds,
        }
        read_timeout = self._settings.watch_timeout_seconds + 30.0
        async with self._open_stream(path, query, read_timeout, what) as chunks:
            async for line in _lines(chunks):
                kind, obj = decode(line)
                if kind == "ERROR":
                    code = int(obj.get("code") or 500)
                    self.errors[str(code)] += 1
                    raise translate_status(code, line, {}, what).error
                yield kind, obj

    async def stream(self, path: str, params: Params, follow: bool) -> AsyncIterator[bytes]:
        """Raw bytes of a streamed GET (pod logs)."""
        async with self._open_stream(path, params, None if follow else 60.0, f"GET {path}") as chunks:
            async for chunk in chunks:
                yield chunk

    @contextlib.asynccontextmanager
    async def _open_stream(
        self, path: str, params: Params, read_timeout: float | None, what: str
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """A streamed GET's chunks, through the rate limiter; an error answer and a dropped
        connection (also while the caller reads) come out as domain errors."""
        await self._bucket.acquire()
        self.requests += 1
        try:
            async with self._transport.stream(path, params, read_timeout=read_timeout) as (
                status,
                chunks,
                headers,
            ):
                if status >= 400:
                    self.errors[str(status)] += 1
                    body = b"".join([chunk async for chunk in chunks])
                    raise translate_status(status, body, headers, what).error
                yield chunks
        except TRANSPORT_ERRORS as exc:
            self.errors["connection"] += 1
            raise translate_transport(exc, what).error from None
        except CredentialsError as exc:
            raise translate_credentials(exc, what) from None


def _json(body: bytes, what: str) -> KubeObject:
    """A successful answer's document; one that is not JSON (a proxy's page, a compressed body)
    is the server's fault, not the caller's, and stays inside the domain's errors."""
    if not body:
        return {}
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise PermanentError(f"{what}: the answer is not JSON ({exc}): {body[:80]!r}") from None
    if not isinstance(doc, dict):
        raise PermanentError(f"{what}: the answer is not a JSON object: {body[:80]!r}")
    return doc


async def _lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Split a byte stream into non-empty lines without decoding to str (orjson takes bytes)."""
    rest = b""
    async for chunk in chunks:
        rest += chunk
        if b"\n" not in chunk:
            continue
        *lines, rest = rest.split(b"\n")
        for line in lines:
            if line:
                yield line
    if rest.strip():
        yield rest
