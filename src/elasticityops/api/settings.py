"""The API's own knobs: request bodies, waits, and the URL jobs call back on."""

from __future__ import annotations

from dataclasses import dataclass

from elasticityops.knobs import knob

MIB = 1024 * 1024


@dataclass(frozen=True)
class ApiSettings:
    max_payload_bytes: int = knob(
        1 * MIB,
        env="EOPS_MAX_PAYLOAD_BYTES",
        unit="bytes",
        ge=1,
        shown=f"{MIB} (1 MiB)",
        help="Largest request body: invocation payloads, function specs and results.",
    )
    max_wait_seconds: int = knob(
        900, env="EOPS_MAX_WAIT_SECONDS", unit="seconds", ge=0, help="Longest ?wait= a caller may ask for."
    )
    public_url: str = knob(
        "",
        env="EOPS_PUBLIC_URL",
        unit="URL",
        shown="http://HOST:PORT, with 127.0.0.1 for a wildcard host",
        help="URL jobs use to reach this gateway (the result callback).",
    )
