"""The dev cluster's one narrow seam to the API server: a small synchronous JSON client.

Plain httpx with the admin client certificate, not a typed client: the emulator lists thousands
of pods every cycle and only needs a handful of fields, so decoding into models would cost more
CPU than the API server itself on a 2-core machine.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from elasticityops.devcluster.errors import KubeApiError


@dataclass(frozen=True)
class Credentials:
    server: str
    ca_cert: Path
    client_cert: Path
    client_key: Path


class KubeApi:
    def __init__(self, creds: Credentials, timeout: float = 30.0) -> None:
        ctx = ssl.create_default_context(cafile=str(creds.ca_cert))
        ctx.load_cert_chain(str(creds.client_cert), str(creds.client_key))
        self._http = httpx.Client(base_url=creds.server, verify=ctx, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> KubeApi:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _check(self, resp: httpx.Response) -> dict[str, Any]:
        if resp.status_code >= 400:
            try:
                message = str(resp.json().get("message", resp.text))
            except ValueError:
                message = resp.text
            raise KubeApiError(resp.status_code, message)
        data: dict[str, Any] = resp.json() if resp.content else {}
        return data

    def _request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:  # transport errors become our error type, status 0
            raise KubeApiError(0, f"{method} {path}: {exc}") from exc
        return self._check(resp)

    def get(self, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        return self._request("GET", path, params=params)

    def list(
        self, path: str, params: dict[str, str] | None = None, page: int = 1000
    ) -> Iterator[dict[str, Any]]:
        """All items of a collection, fetched in pages so a 4,000-pod list stays cheap."""
        query = dict(params or {})
        query["limit"] = str(page)
        while True:
            data = self.get(path, query)
            yield from data.get("items", [])
            cont = data.get("metadata", {}).get("continue")
            if not cont:
                return
            query["continue"] = cont

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", path, json=body)

    def delete(self, path: str, missing_ok: bool = True) -> None:
        try:
            self._request("DELETE", path)
        except KubeApiError as exc:
            if not (missing_ok and exc.status == 404):
                raise

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._request(
            "PATCH", path, json=body, headers={"Content-Type": "application/merge-patch+json"}
        )

    def ok(self, path: str) -> bool:
        """True if GET path answers 200 (readiness probes); never raises."""
        try:
            return self._http.get(path).status_code == 200
        except httpx.HTTPError:
            return False
