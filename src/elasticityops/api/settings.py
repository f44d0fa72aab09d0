"""The API's own knobs: request bodies, waits, the URL jobs call back on, and the token that
scrapes /metrics."""

from __future__ import annotations

import re
from dataclasses import dataclass

from elasticityops.knobs import knob

MIB = 1024 * 1024
METRICS_TOKEN_CHARS = (16, 4096)
"""Shortest and longest scrape token: 16 characters of a bearer token's alphabet (RFC 6750) is
96 bits at the least, and nothing longer fits one header line comfortably."""
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def parse_metrics_token(raw: object) -> str:
    """A scrape token as written (empty: none); a ValueError saying why when no bearer header
    could carry it or it is too short to guess at."""
    token = str(raw)
    if token == "":
        return ""
    shortest, longest = METRICS_TOKEN_CHARS
    if _TOKEN68.fullmatch(token) is None:
        raise ValueError(
            "a scrape token holds only letters, digits and -._~+/ (a bearer token's characters, "
            "'=' at its end); make one with: openssl rand -hex 32"
        )
    if not shortest <= len(token) <= longest:
        raise ValueError(
            f"a scrape token is {shortest} to {longest} characters, not {len(token)}; make one "
            "with: openssl rand -hex 32"
        )
    return token


@dataclass(frozen=True)
class ApiSettings:
    max_payload_bytes: int = knob(
        1 * MIB,
        env="EOPS_MAX_PAYLOAD_BYTES",
        unit="bytes",
        ge=1,
        le=256 * MIB,
        shown=f"{MIB} (1 MiB)",
        help="Largest request body: invocation payloads, function specs and results.",
    )
    max_batch_inputs: int = knob(
        1000,
        env="EOPS_MAX_BATCH_INPUTS",
        unit="inputs",
        ge=1,
        le=100_000,
        help="Most inputs one batch (POST /v1/functions/NAME/invocations:batch) may carry; the "
        "client's map splits larger ones into batches of this many.",
    )
    max_batch_bytes: int = knob(
        64 * MIB,
        env="EOPS_MAX_BATCH_BYTES",
        unit="bytes",
        ge=1,
        le=1024 * MIB,
        shown=f"{64 * MIB} (64 MiB)",
        help="Largest batch request body; each input within it is held to the payload limit too.",
    )
    max_wait_seconds: int = knob(
        900,
        env="EOPS_MAX_WAIT_SECONDS",
        unit="seconds",
        ge=0,
        le=86_400,
        help="Longest ?wait= a caller may ask for.",
    )
    public_url: str = knob(
        "",
        env="EOPS_PUBLIC_URL",
        unit="URL",
        shown="http://HOST:PORT, with 127.0.0.1 for a wildcard host",
        help="URL jobs use to reach this gateway (the result callback).",
    )
    metrics_token: str = knob(
        "",
        env="EOPS_METRICS_TOKEN",
        metavar="TOKEN",
        parse=parse_metrics_token,
        shown="none: /metrics is open",
        help="Bearer token /metrics asks for (Prometheus's scrape credential; an admin API token "
        "works too); /metrics exports cost by function, which /v1/cost shows to admins only.",
    )
