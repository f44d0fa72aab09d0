"""A real HTTP/1.1 server on 127.0.0.1 that answers from a script, to test the client's retries
against real sockets: status codes, Retry-After, streamed watch lines, dropped connections.
Over TLS too (`ssl_context`), and on a loop of its own thread for blocking clients
(`scripted_in_thread`)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from urllib.parse import unquote

import orjson


@dataclass
class Reply:
    status: int = 200
    body: object = None
    headers: dict[str, str] = field(default_factory=dict)
    lines: list[object] | None = None  # streamed as a chunked watch answer
    drop: bool = False  # close the connection without answering
    hold: bool = False  # answer 200 with a chunked body that never ends (an idle watch)
    raw: bytes | None = None  # the body as it is, not JSON (a pod's log)


@dataclass
class Seen:
    method: str
    target: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)  # names lower-cased


class ScriptedServer:
    """Replies in order; or, with `routes`, the next reply queued for the first route (a regular
    expression searched in "METHOD /path?query") that matches, so concurrent clients (watches
    and launches) each get theirs. The last reply of a route repeats."""

    def __init__(self, replies: list[Reply], routes: dict[str, list[Reply]] | None = None) -> None:
        self.replies = list(replies)
        self.routes = routes or {}
        self.seen: list[Seen] = []
        self._server: asyncio.Server | None = None
        self.url = ""

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", 0))
                body = await reader.readexactly(length) if length else b""
                self.seen.append(Seen(method, target, body, headers))
                # Routes match the decoded target: clients differ in which query characters
                # they escape (a comma, a slash), the server reads the same either way.
                reply = self._next(f"{method} {unquote(target)}")
                if reply.drop:
                    writer.close()
                    return
                await self._answer(writer, reply)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _next(self, request: str) -> Reply:
        for prefix, queue in self.routes.items():
            if re.search(prefix, request) and queue:
                return queue.pop(0) if len(queue) > 1 else queue[0]  # the last one repeats
        return self.replies.pop(0) if self.replies else Reply(500, {"message": "script exhausted"})

    async def _answer(self, writer: asyncio.StreamWriter, reply: Reply) -> None:
        headers = {"Content-Type": "application/json", **reply.headers}
        if reply.hold:
            writer.write(_head(200, {**headers, "Transfer-Encoding": "chunked"}))
            await writer.drain()
            await asyncio.Event().wait()  # until the server is closed
        if reply.lines is not None:
            headers["Transfer-Encoding"] = "chunked"
            writer.write(_head(reply.status, headers))
            for item in reply.lines:
                data = orjson.dumps(item) + b"\n"
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await writer.drain()
            writer.write(b"0\r\n\r\n")
        else:
            if reply.raw is not None:
                headers["Content-Type"] = "text/plain"
                data = reply.raw
            else:
                data = orjson.dumps(reply.body) if reply.body is not None else b""
            headers["Content-Length"] = str(len(data))
            writer.write(_head(reply.status, headers) + data)
        await writer.drain()


def _head(status: int, headers: dict[str, str]) -> bytes:
    text = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return text.encode()


@contextlib.asynccontextmanager
async def scripted(
    replies: list[Reply],
    routes: dict[str, list[Reply]] | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> AsyncIterator[ScriptedServer]:
    server = ScriptedServer(replies, routes)
    srv = await asyncio.start_server(server._handle, "127.0.0.1", 0, ssl=ssl_context)
    port = srv.sockets[0].getsockname()[1]
    server.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"
    try:
        yield server
    finally:
        srv.close()
        with contextlib.suppress(Exception):
            await srv.wait_closed()


@contextlib.contextmanager
def scripted_in_thread(
    replies: list[Reply],
    routes: dict[str, list[Reply]] | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> Iterator[ScriptedServer]:
    """`scripted`, served by an event loop in a thread of its own: for blocking clients called
    from synchronous test code (or from inside another event loop)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="scripted-server", daemon=True)
    thread.start()
    manager = scripted(replies, routes, ssl_context)
    try:
        server = asyncio.run_coroutine_threadsafe(manager.__aenter__(), loop).result(10)
        try:
            yield server
        finally:
            asyncio.run_coroutine_threadsafe(manager.__aexit__(None, None, None), loop).result(10)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
