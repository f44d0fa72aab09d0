"""A real HTTP/1.1 server on 127.0.0.1 that answers from a script, to test the client's retries
against real sockets: status codes, Retry-After, streamed watch lines, dropped connections."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import orjson


@dataclass
class Reply:
    status: int = 200
    body: object = None
    headers: dict[str, str] = field(default_factory=dict)
    lines: list[object] | None = None  # streamed as a chunked watch answer
    drop: bool = False  # close the connection without answering


@dataclass
class Seen:
    method: str
    target: str
    body: bytes


class ScriptedServer:
    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.seen: list[Seen] = []
        self._server: asyncio.Server | None = None
        self.url = ""

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                length = 0
                for line in lines[1:]:
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                body = await reader.readexactly(length) if length else b""
                self.seen.append(Seen(method, target, body))
                reply = self.replies.pop(0) if self.replies else Reply(500, {"message": "script exhausted"})
                if reply.drop:
                    writer.close()
                    return
                await self._answer(writer, reply)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _answer(self, writer: asyncio.StreamWriter, reply: Reply) -> None:
        headers = {"Content-Type": "application/json", **reply.headers}
        if reply.lines is not None:
            headers["Transfer-Encoding"] = "chunked"
            writer.write(_head(reply.status, headers))
            for item in reply.lines:
                data = orjson.dumps(item) + b"\n"
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await writer.drain()
            writer.write(b"0\r\n\r\n")
        else:
            data = orjson.dumps(reply.body) if reply.body is not None else b""
            headers["Content-Length"] = str(len(data))
            writer.write(_head(reply.status, headers) + data)
        await writer.drain()


def _head(status: int, headers: dict[str, str]) -> bytes:
    text = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return text.encode()


@contextlib.asynccontextmanager
async def scripted(replies: list[Reply]) -> AsyncIterator[ScriptedServer]:
    server = ScriptedServer(replies)
    srv = await asyncio.start_server(server._handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    server.url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        srv.close()
        with contextlib.suppress(Exception):
            await srv.wait_closed()
