"""Caps on a request's head (request line and headers), enforced by the HTTP server before any
of it reaches the app: over `MAX_HEAD_BYTES` or `MAX_HEADERS` headers the connection gets
`431 Request Header Fields Too Large` and is closed.

uvicorn's httptools protocol (the one `uvicorn[standard]` runs) buffers a header block of any
size: a 50 MB one was read, parsed and handed to the app. llhttp has no size limit of its own and
uvicorn sets none (`h11_max_incomplete_event_size` only applies to its h11 protocol), so this
subclass counts the bytes fed to the parser while a head is incomplete (a head that never ends
is cut off after at most one read past the limit), and what the parser hands over (a head that
arrived whole in one read). It relies on uvicorn's
HttpToolsProtocol internals (`parser`, the `on_*` callbacks, `data_received`'s error handling),
pinned by pyproject's `uvicorn<1`; tests/api/test_header_limits.py checks it over a socket."""

from __future__ import annotations

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

MAX_HEAD_BYTES = 64 * 1024  # nginx allows 4 x 8 KiB, Node 16 KiB
MAX_HEADERS = 100  # Apache's LimitRequestFields


class HeadTooLarge(Exception):
    """Raised in a parser callback to stop parsing a head over a limit."""


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    max_head_bytes = MAX_HEAD_BYTES
    max_headers = MAX_HEADERS

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._head_open = True  # the bytes being fed belong to a head not yet complete
        self._head_bytes = 0
        self._heads_done = 0
        self._header_count = 0
        self._parsed_bytes = 0

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_count = 0
        self._parsed_bytes = 0

    def _parsed(self, size: int) -> None:
        # What the parser handed over so far: catches a head that arrived in one read.
        self._parsed_bytes += size
        if self._parsed_bytes > self.max_head_bytes:
            raise HeadTooLarge(f"the request line and headers are over {self.max_head_bytes} bytes")

    def on_url(self, url: bytes) -> None:
        self._parsed(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.max_headers:
            raise HeadTooLarge(f"more than {self.max_headers} header fields")
        self._parsed(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._head_open = False
        self._heads_done += 1
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._head_open = True
        self._head_bytes = 0

    def data_received(self, data: bytes) -> None:
        open_before, done_before = self._head_open, self._heads_done
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, HeadTooLarge):
                self.send_431_response(str(exc.__context__))
            else:
                msg = "Invalid HTTP request received."
                self.logger.warning(msg)
                self.send_400_response(msg)
            return
        if not self._head_open or self.transport.is_closing():
            return
        if open_before and self._heads_done == done_before:
            # The whole chunk went into the head still open: count it.
            self._head_bytes += len(data)
        else:
            # A head began inside this chunk (after a request ended in it): its share is not
            # known, so counting starts with the next chunk (under by at most one read).
            self._head_bytes = 0
        if self._head_bytes > self.max_head_bytes:
            self.send_431_response(f"the request line and headers are over {self.max_head_bytes} bytes")

    def send_431_response(self, why: str) -> None:
        msg = f"Request Header Fields Too Large: {why}".encode("ascii")
        content = [STATUS_LINE[431]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend(
            [
                b"content-type: text/plain; charset=utf-8\r\n",
                b"content-length: " + str(len(msg)).encode("ascii") + b"\r\n",
                b"connection: close\r\n",
                b"\r\n",
                msg,
            ]
        )
        self.logger.warning("refused a request head: %s", why)
        self.transport.write(b"".join(content))
        self.transport.close()
