"""Arbitrary request headers, sent over a raw socket to every route of /openapi.json: odd names
and values (non-ASCII, very long, control characters but CR and LF), duplicate Authorization,
odd Content-Type, Idempotency-Key variants, Content-Length that does not match the body. The
gateway answers each with a status below 500, or closes a malformed request's connection, and
stays healthy. (Schemathesis' header generation for declared header parameters runs in
test_schemathesis.py and test_stateful.py; this covers the headers no schema declares.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import hypothesis
import pytest
from hypothesis import strategies as st

from helpers.rawhttp import raw_request
from helpers.server import RunningServer, running_server

pytestmark = pytest.mark.slow

FUNCTION = "hdr"
SPEC = b'{"name": "hdr", "command": ["python", "-c", "print(1)"]}'
_TCHAR = b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_TCHAR_BYTES = [bytes([byte]) for byte in _TCHAR]
_KNOWN = [
    b"Authorization",
    b"authorization",
    b"Content-Type",
    b"Content-Length",
    b"Transfer-Encoding",
    b"Idempotency-Key",
    b"Accept",
    b"Accept-Encoding",
    b"Expect",
    b"Connection",
    b"Cookie",
    b"X-Forwarded-For",
]


@pytest.fixture(scope="module")
def header_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, list[str]]]:
    """A paused gateway with one function and one queued invocation of it; the request targets
    of every route, path parameters filled with them."""
    with running_server(
        Path(tmp_path_factory.mktemp("headers")), "--paused", env={"EOPS_MAX_WAIT_SECONDS": "1"}
    ) as gw:
        with gw.client() as http:
            http.put(f"/v1/functions/{FUNCTION}", content=SPEC).raise_for_status()
            inv = http.post(f"/v1/functions/{FUNCTION}/invocations", json={"x": 1}).raise_for_status().json()
            paths = http.get("/openapi.json").json()["paths"]
        fill = {"{name}": FUNCTION, "{invocation_id}": inv["id"], "{token_id}": "tok-none"}
        targets = []
        for path, item in paths.items():
            for key, value in fill.items():
                path = path.replace(key, value)
            targets += [f"{method.upper()} {path}" for method in item]
        yield gw, sorted(targets)


def _value_bytes() -> st.SearchStrategy[bytes]:
    # Any byte but CR and LF (which would end the header line), short or very long.
    no_crlf = st.binary(max_size=64).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
    text = st.text(max_size=32).map(lambda s: s.encode("utf-8", "surrogatepass"))
    text = text.map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
    long = st.sampled_from([b"a" * 9000, "é".encode() * 3000, b"\x01\x7f\t" * 1000])
    return st.one_of(no_crlf, text, long)


def _header(token: str) -> st.SearchStrategy[tuple[bytes, bytes]]:
    bearer = f"Bearer {token}".encode()
    # Any token name, drawn from the token characters themselves: random bytes filtered down to
    # them were mostly rejected, which cost most of the test's generation time.
    any_name = st.lists(st.sampled_from(_TCHAR_BYTES), min_size=1, max_size=40).map(b"".join)
    name = st.one_of(st.sampled_from(_KNOWN), any_name)
    return st.one_of(
        st.tuples(name, _value_bytes()),
        st.tuples(
            st.just(b"Authorization"),
            st.sampled_from(
                [bearer, bearer + b" x", b"Bearer", b"Basic dXNlcjpwYXNz", bearer.lower(), b"Bearer \xff\xfe"]
            ),
        ),
        st.tuples(
            st.just(b"Content-Type"),
            st.sampled_from(
                [
                    b"application/yaml",
                    b"application/json; charset=latin-1",
                    b"text/plain",
                    b"multipart/form-data; boundary=",
                    b"application/x-www-form-urlencoded",
                    b"application/json\x00",
                    b";;;",
                    "application/jsön".encode(),
                ]
            ),
        ),
        st.tuples(
            st.just(b"Idempotency-Key"),
            st.one_of(
                st.sampled_from(
                    [b"", b" ", b"k" * 201, b"k" * 200, b"\xff", b"\xc3\xa9", b"a\x01b", b"a\tb"]
                ),
                _value_bytes(),
            ),
        ),
        st.tuples(
            st.just(b"Content-Length"),
            st.sampled_from(
                [b"0", b"1", b"-1", b"99999999999999999999", b"1e3", b" 5 ", b"\xd9\xa3", b"5, 5"]
            ),
        ),
    )


def _requests(token: str, targets: list[str]) -> st.SearchStrategy[tuple[str, bytes, bool]]:
    # The header strategy is built once, not in every draw: hypothesis validates a strategy the
    # first time it is drawn from, and this one's validation cost more than its drawing.
    return _request(token, st.sampled_from(targets), st.lists(_header(token), max_size=6))


@st.composite
def _request(
    draw: st.DrawFn,
    token: str,
    targets: st.SearchStrategy[str],
    header_lists: st.SearchStrategy[list[tuple[bytes, bytes]]],
) -> tuple[str, bytes, bool]:
    target = draw(targets)
    method, path = target.split(" ", 1)
    headers = draw(header_lists)
    if draw(st.booleans()):  # mostly authorized, so the route itself sees the odd headers
        headers.insert(0, (b"Authorization", f"Bearer {token}".encode()))
    body = draw(st.sampled_from([b"", b"{}", b"null", SPEC, b"\xff\xfe{", b"x" * 3000]))
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: 127.0.0.1", b"Connection: close"]
    lines += [name + b": " + value for name, value in headers]
    declared = any(name.lower() in (b"content-length", b"transfer-encoding") for name, _ in headers)
    if body and not declared:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return target, b"\r\n".join(lines) + b"\r\n\r\n" + body, declared


def test_odd_headers_never_get_a_server_error(header_gateway: tuple[RunningServer, list[str]]) -> None:
    gw, targets = header_gateway
    assert len(targets) >= 12
    statuses: dict[int, int] = {}

    @hypothesis.given(request=_requests(gw.token, targets))
    @hypothesis.settings(
        max_examples=300,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    def check(request: tuple[str, bytes, bool]) -> None:
        target, raw, declared = request
        # Half-closed when the headers declare the length: a Content-Length over the body is
        # then an incomplete request the server sees end, not one it waits for.
        # The event stream's status line is its answer: its body goes on until the timeout
        # (15 s each time it was drawn, most of this test's time).
        answer = raw_request(
            gw.port, raw, timeout=15, half_close=declared, head_only=target == "GET /v1/events"
        )
        statuses[answer.status] = statuses.get(answer.status, 0) + 1
        # 0: no answer, the connection closed (the server refused malformed HTTP).
        assert answer.status == 0 or 100 <= answer.status < 500, (target, raw[:500], answer.head, answer.body)
        assert answer.status != 0 or declared or _malformed(raw), (target, raw[:500], "closed unanswered")

    check()
    print(sorted(statuses.items()))
    assert httpx.get(gw.url + "/healthz", timeout=5).json() == {"status": "ok"}
    assert gw.process.poll() is None
    log = gw.output()
    assert "Exception in ASGI application" not in log, log[-5000:]
    assert "incident" not in log, log[-5000:]


def _malformed(raw: bytes) -> bool:
    """Header bytes h11/httptools refuse (control characters, bytes no header field may hold):
    answered with 400 or by closing."""
    head = raw.partition(b"\r\n\r\n")[0]
    return any((byte < 0x20 and byte != 0x09) or byte == 0x7F for byte in head)


def test_the_gateway_is_healthy_after_the_header_fuzz(
    header_gateway: tuple[RunningServer, list[str]],
) -> None:
    gw, _ = header_gateway
    with gw.client() as http:
        assert http.get(f"/v1/functions/{FUNCTION}").status_code in (200, 404)
        assert http.get("/readyz").status_code == 200


def test_a_body_cut_short_of_its_content_length_is_a_4xx_not_an_exception(
    header_gateway: tuple[RunningServer, list[str]],
) -> None:
    """The example the fuzz above once found: an invocation whose client half-closes after 10 of
    the 100 bytes its Content-Length promised (starlette's ClientDisconnect, mid-body)."""
    gw, _ = header_gateway
    raw = (
        f"POST /v1/functions/{FUNCTION}/invocations HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {gw.token}\r\nContent-Type: application/json\r\n"
        "Content-Length: 100\r\n\r\n"
    ).encode() + b'{"x": 1, "'
    answer = raw_request(gw.port, raw, timeout=15, half_close=True)
    assert answer.status == 0 or 400 <= answer.status < 500, (answer.head, answer.body)
    assert httpx.get(gw.url + "/healthz", timeout=5).status_code == 200
    assert "Exception in ASGI application" not in gw.output()[-20000:]
