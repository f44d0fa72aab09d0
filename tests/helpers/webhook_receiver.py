"""A webhook receiver for tests, run as a process of its own: it records every POST it gets
(headers and body, one JSON line each, in the order they came) and answers 500 to the first
`--fail-first` of them, `--answer` after (200; a 3xx comes with a Location). `Receiver` starts
it on a port and stops it by its PID.

    with running_receiver(tmp_path / "got.jsonl", port, fail_first=5) as receiver:
        ... receiver.requests() ...
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx


@dataclass
class Receiver:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def requests(self) -> list[dict[str, Any]]:
        """What it got so far: {"headers": {...}, "body": str, "status": int, "path": str} each."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
        self.process.wait(10)


def start_receiver(
    log: Path, port: int, *, fail_first: int = 0, answer: int = 200, drip: tuple[int, float] | None = None
) -> Receiver:
    """`drip`: answer with a body that never ends, (bytes, seconds) at a time."""
    command = [sys.executable, __file__, "--log", str(log), "--port", str(port)]
    command += ["--fail-first", str(fail_first), "--answer", str(answer)]
    if drip is not None:
        command += ["--drip-bytes", str(drip[0]), "--drip-every", str(drip[1])]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    receiver = Receiver(process, port, log)
    deadline = time.monotonic() + 20
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/ready", timeout=1.0)
            return receiver
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                receiver.stop()
                raise RuntimeError(f"the webhook receiver did not start on port {port}") from None
            time.sleep(0.05)


@contextmanager
def running_receiver(
    log: Path, port: int, *, fail_first: int = 0, answer: int = 200, drip: tuple[int, float] | None = None
) -> Iterator[Receiver]:
    receiver = start_receiver(log, port, fail_first=fail_first, answer=answer, drip=drip)
    try:
        yield receiver
    finally:
        receiver.stop()


def wait_for(
    receiver: Receiver, count: int, timeout: float = 30.0, ok_only: bool = True
) -> list[dict[str, Any]]:
    """The requests once at least `count` of them (answered 200 with `ok_only`) have come."""
    deadline = time.monotonic() + timeout
    while True:
        got = [r for r in receiver.requests() if r["status"] == 200 or not ok_only]
        if len(got) >= count:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"the receiver got {receiver.requests()} within {timeout}s, wanted {count}")
        time.sleep(0.05)


def _serve(log: Path, port: int, fail_first: int, answer: int, drip: tuple[int, float] | None) -> None:
    lock = threading.Lock()
    seen = [0]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            with lock:
                seen[0] += 1
                status = 500 if seen[0] <= fail_first else answer
                record = {
                    "headers": dict(self.headers.items()),
                    "body": body.decode(),
                    "status": status,
                    "path": self.path,
                }
                with log.open("a") as out:
                    out.write(json.dumps(record) + "\n")
            self.send_response(status)
            if 300 <= status < 400:
                self.send_header("location", f"http://127.0.0.1:{port}/elsewhere")
            if drip is None:
                self.send_header("content-length", "0")
                self.end_headers()
                return
            # An answer that never ends, until the client hangs up.
            self.send_header("content-length", str(1 << 40))
            self.end_headers()
            try:
                while True:
                    self.wfile.write(b"x" * drip[0])
                    self.wfile.flush()
                    time.sleep(drip[1])
            except OSError:
                return

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--answer", type=int, default=200, help="the status after the failures")
    parser.add_argument("--drip-bytes", type=int, default=0, help="answer with a body that never ends")
    parser.add_argument("--drip-every", type=float, default=0.05)
    options = parser.parse_args()
    drip = (options.drip_bytes, options.drip_every) if options.drip_bytes else None
    _serve(options.log, options.port, options.fail_first, options.answer, drip)
