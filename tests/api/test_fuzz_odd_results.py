"""A fuzz run over HTTP with the new result shapes and extreme settings (issue 37): a real gateway
whose knobs sit at the ends of their declared ranges runs a job that writes whatever result it is
sent, and hypothesis sends it results one JSON reader takes and another refuses or changes
(integers past 64 bits, lone surrogates, nesting thousands deep, NaN, infinities, floats past
double range, keys twice, bytes that are not UTF-8, and mixes of them), through its result file or
its callback, under function specs with extreme values. No answer may be a 5xx: not the invoke
with ?wait, not the invocation, not the list, not its logs, not the metrics; and every read serves
the result as the first did."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticityops.domain.functions import MAX_RETRIES, Priority
from helpers.server import RunningServer, running_server

from .test_odd_results import WRITES

pytestmark = pytest.mark.slow

# Knobs at the ends of their declared ranges (tests/test_knob_ranges.py walks them all): the
# largest headroom a policy may ask, the largest GPU budget, bodies and waits at their most, one
# write a commit, the console's streams at their least.
EXTREME = {
    "EOPS_HEADROOM": "warm:100000",
    "EOPS_GPU_BUDGET": "1000000",
    "EOPS_MAX_PAYLOAD_BYTES": str(256 * 1024 * 1024),
    "EOPS_MAX_WAIT_SECONDS": "86400",
    "EOPS_GROUP_COMMIT_MAX": "1",
    "EOPS_CONSOLE_MAX_STREAMS": "0",
    "EOPS_MAX_LOG_BYTES": "1",
}


@pytest.fixture(scope="module")
def extreme_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with running_server(tmp_path_factory.mktemp("extreme"), "--gpus", "2", env=EXTREME) as gateway:
        yield gateway


def _fragment() -> st.SearchStrategy[bytes]:
    """One JSON value as text, strict or not."""
    big_int = st.integers(min_value=2**63, max_value=2**256).flatmap(lambda n: st.sampled_from([n, -n]))
    surrogate = st.integers(0xD800, 0xDFFF).map(lambda c: b'"\\u%04x"' % c)
    return st.one_of(
        big_int.map(lambda n: str(n).encode()),
        surrogate,
        st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e309", b"1e-400", b"2.5e308"]),
        st.sampled_from([b'{"a": 1, "a": 2}', b"caf\xe9", b"\xff\xfe", b'"\\u0000"', b"-0", b"0.0"]),
        st.floats(allow_nan=True, allow_infinity=True).map(lambda x: repr(x).encode()),
        st.integers(-(2**63), 2**63 - 1).map(lambda n: str(n).encode()),
    )


def _nested(inner: bytes, depth: int, as_object: bool) -> bytes:
    if as_object:
        return b'{"k": ' * depth + inner + b"}" * depth
    return b"[" * depth + inner + b"]" * depth


odd_results = st.one_of(
    _fragment(),
    st.lists(_fragment(), min_size=1, max_size=6).map(lambda parts: b"[" + b", ".join(parts) + b"]"),
    st.builds(_nested, _fragment(), st.integers(1, 3000), st.booleans()),
    st.binary(max_size=64),
)

# A function's numeric fields at the ends of their ranges (domain/functions.py).
extreme_specs = st.fixed_dictionaries(
    {
        # Not 1 s: a job's wait for its slot counts, and it must run to write its result.
        "timeout_seconds": st.sampled_from([60, 7 * 24 * 3600]),
        "max_concurrency": st.sampled_from([1, 100_000]),
        "retries": st.sampled_from([0, MAX_RETRIES]),
        "priority": st.sampled_from([p.value for p in Priority]),
        "preemptible": st.booleans(),
    }
)


def _no_server_error(answer: httpx.Response) -> httpx.Response:
    assert answer.status_code < 500, f"{answer.request.method} {answer.request.url}: {answer.text[:500]}"
    return answer


@pytest.fixture(scope="module")
def deployed(extreme_gateway: RunningServer) -> dict[str, str]:
    """Writers deployed under a few extreme specs, by spec, so each example does not deploy."""
    return {}


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(
    raw=odd_results,
    via=st.sampled_from(["file", "callback"]),
    spec=extreme_specs,
    wait=st.sampled_from([0, 60]),
)
def test_no_odd_result_or_extreme_setting_gets_a_server_error(
    extreme_gateway: RunningServer,
    deployed: dict[str, str],
    raw: bytes,
    via: str,
    spec: dict[str, Any],
    wait: int,
) -> None:
    key = repr(sorted(spec.items()))
    with extreme_gateway.client(timeout=120) as http:
        if key not in deployed:
            name = "fuzz-" + uuid.uuid4().hex[:8]
            body = {"command": ["python", "-c", WRITES], **spec}
            assert _no_server_error(http.put(f"/v1/functions/{name}", json=body)).status_code == 201
            deployed[key] = name
        name = deployed[key]
        accepted = _no_server_error(
            http.post(
                f"/v1/functions/{name}/invocations",
                params={"wait": wait},
                json={"hex": raw.hex(), "via": via},
            )
        )
        assert accepted.status_code in (200, 202), accepted.text
        inv = accepted.json()["id"]
        done = _no_server_error(http.get(f"/v1/invocations/{inv}", params={"wait": 60})).json()
        assert done["state"] == "succeeded", done
        again = _no_server_error(http.get(f"/v1/invocations/{inv}")).json()
        assert again["result"] == done["result"], "every read serves what the first did"
        listed = _no_server_error(http.get("/v1/invocations", params={"function": name, "limit": 500}))
        [item] = [i for i in listed.json()["items"] if i["id"] == inv]
        assert item["result_summary"] == again["result_summary"]
        _no_server_error(http.get(f"/v1/invocations/{inv}/logs"))
        _no_server_error(http.get("/metrics"))
