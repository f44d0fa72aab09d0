"""The server caps a request's head (http_limits.py): 431 and a closed connection past 64 KiB of
request line and headers or past 100 header fields, before the app or auth sees anything. Sent
over a raw socket: no client library sends such heads."""

from __future__ import annotations

import time

import pytest

from helpers.rawhttp import raw_request, request_bytes
from helpers.server import RunningServer

MiB = 1024 * 1024


def test_a_50_mb_header_block_is_refused_with_431_after_a_few_kilobytes(gateway: RunningServer) -> None:
    big = b"a" * (50 * MiB)
    answer = raw_request(gateway.port, request_bytes("GET", "/healthz", [(b"X-Filler", big)]))
    assert answer.status == 431, answer.head
    assert b"Request Header Fields Too Large" in answer.body
    # The server stopped reading at the limit (plus what sat in socket buffers), not at 50 MB.
    assert answer.sent < 8 * MiB, f"the server took {answer.sent} bytes before refusing"
    assert answer.seconds < 2.0, f"took {answer.seconds:.2f}s"
    print(f"50 MB header: 431 after {answer.sent} bytes sent, {answer.seconds * 1000:.0f} ms")


def test_many_header_lines_together_over_the_size_limit_are_refused(gateway: RunningServer) -> None:
    headers = [(f"X-H{n}".encode(), b"v" * 1000) for n in range(90)]  # 90 KB in 90 fields
    answer = raw_request(gateway.port, request_bytes("GET", "/healthz", headers))
    assert answer.status == 431, answer.head


def test_a_long_url_counts_toward_the_head(gateway: RunningServer) -> None:
    answer = raw_request(gateway.port, request_bytes("GET", "/healthz?x=" + "a" * 100_000, []))
    assert answer.status == 431, answer.head


@pytest.mark.parametrize(("count", "status"), [(95, 200), (101, 431), (5000, 431)])
def test_header_fields_are_counted(gateway: RunningServer, count: int, status: int) -> None:
    headers = [(f"X-H{n}".encode(), b"1") for n in range(count)]  # + Host, Connection
    answer = raw_request(gateway.port, request_bytes("GET", "/healthz", headers))
    assert answer.status == status, answer.head


def test_a_head_just_under_the_limit_is_served(gateway: RunningServer) -> None:
    answer = raw_request(gateway.port, request_bytes("GET", "/healthz", [(b"X-Filler", b"a" * 60_000)]))
    assert answer.status == 200, answer.head


def test_a_large_body_after_a_small_head_is_not_taken_for_a_head(gateway: RunningServer) -> None:
    """One write holding a small head and a 1 MB body: the body is no part of the head."""
    body = b"[" + b"1," * (512 * 1024 - 1) + b"1]"
    request = request_bytes(
        "POST",
        "/v1/functions/none/invocations",
        [(b"Authorization", f"Bearer {gateway.token}".encode()), (b"Content-Type", b"application/json")],
        body,
    )
    answer = raw_request(gateway.port, request, chunk=len(request))
    assert answer.status == 404, answer.head  # no such function: the request reached the app


def test_a_slow_head_is_counted_across_reads(gateway: RunningServer) -> None:
    """A head sent a little at a time is summed over the reads, not judged read by read."""
    import socket

    with socket.create_connection(("127.0.0.1", gateway.port), timeout=30) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        answer = b""
        for _ in range(200):
            try:
                sock.sendall(b"a" * 1024)
            except (BrokenPipeError, ConnectionResetError):
                break
            time.sleep(0.002)
            sock.setblocking(False)
            try:
                answer += sock.recv(65536)
            except BlockingIOError:
                pass
            except ConnectionResetError:
                break
            finally:
                sock.setblocking(True)
            if answer:
                break
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
