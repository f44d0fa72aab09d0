"""HTTP/1.1 over a plain socket to 127.0.0.1, for requests no client library will send: any
bytes in a header, a header block of any size."""

from __future__ import annotations

import contextlib
import select
import socket
import time
from dataclasses import dataclass

from .server import HOST


@dataclass
class RawAnswer:
    status: int
    head: bytes
    body: bytes
    sent: int  # bytes of the request the server took before it answered or closed
    seconds: float


def _read_answer(sock: socket.socket, deadline: float, head_only: bool) -> bytes:
    data = b""
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        data += chunk
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep and head_only:
            break
        if sep:
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                None,
            )
            if length is not None and len(rest) >= length:
                break
    return data


def raw_request(
    port: int,
    request: bytes,
    *,
    chunk: int = 65536,
    timeout: float = 60.0,
    half_close: bool = False,
    head_only: bool = False,
) -> RawAnswer:
    """Send `request` in chunks, stopping as soon as the server answers or closes, and read the
    answer (one response: the connection is closed after it or the caller does not care).
    `half_close`: shut the sending side once sent, so a server waiting for more body than was
    sent (a Content-Length over the body) sees the end instead of waiting for the timeout.
    `head_only`: return once the status line and headers are in, for an answer whose body never
    ends by itself (an event stream would otherwise hold the call until the timeout)."""
    started = time.monotonic()
    deadline = started + timeout
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sent = 0
        while sent < len(request):
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break
            try:
                sent += sock.send(request[sent : sent + chunk])
            except (BrokenPipeError, ConnectionResetError):
                break
        if half_close:
            with contextlib.suppress(OSError):  # the server closed first
                sock.shutdown(socket.SHUT_WR)
        data = _read_answer(sock, deadline, head_only)
    seconds = time.monotonic() - started
    status_line = data.split(b"\r\n", 1)[0]
    status = int(status_line.split()[1]) if status_line.startswith(b"HTTP/1.1 ") else 0
    head, _, body = data.partition(b"\r\n\r\n")
    return RawAnswer(status, head, body, sent, seconds)


def request_bytes(method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: 127.0.0.1", b"Connection: close"]
    lines += [name + b": " + value for name, value in headers]
    if body or method in ("POST", "PUT"):
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + body
