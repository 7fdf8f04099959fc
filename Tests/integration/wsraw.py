"""A small raw-socket WebSocket (RFC 6455) client for conformance tests.

Unlike a real client library it lets a test say exactly what goes on the wire:
any handshake headers, any opcode / RSV bits / mask / length encoding, frames
cut into chosen chunks with optional pauses between them, and frames cut short.
On the read side it parses every server frame strictly (a server frame must be
unmasked, minimally length-encoded, with RSV bits clear and control frames
short and unfragmented) and tells close frames and a TCP close apart.

Every read is bounded by a timeout; nothing here sleeps to wait for an event.
"""
from __future__ import annotations

import base64
import hashlib
import os
import select
import socket
import ssl
import struct
import time
from dataclasses import dataclass, field

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA

DEFAULT_TIMEOUT = 5.0


class ServerViolation(AssertionError):
    """The server put something on the wire that RFC 6455 forbids."""


class ConnectionClosed(Exception):
    """The TCP connection ended (EOF or reset) while a read wanted more bytes."""

    def __init__(self, how: str, partial: bytes = b""):
        super().__init__(f"TCP connection closed by peer ({how})")
        self.how = how
        self.partial = partial


class ReadTimeout(AssertionError):
    """Nothing (or not enough) arrived before the deadline."""


def accept_key(key: str) -> str:
    """Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 §4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + GUID).digest()).decode()


def mask_bytes(payload: bytes, key: bytes) -> bytes:
    """XOR payload with the 4-byte masking key (RFC 6455 §5.3)."""
    if not payload:
        return b""
    n = len(payload)
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big")


def build_frame(
    opcode: int,
    payload: bytes = b"",
    *,
    fin: bool = True,
    rsv: int = 0,
    mask: bool = True,
    mask_key: bytes | None = None,
    length_bytes: int | None = None,
    declared_length: int | None = None,
) -> bytes:
    """Encode one frame.

    rsv: 3-bit value (RSV1=4, RSV2=2, RSV3=1).
    length_bytes: force the length encoding: 0 (7-bit), 2 (16-bit) or 8 (64-bit);
        None picks the minimal one.
    declared_length: the length written in the header, if it should differ from
        len(payload) (a frame that is then cut short, or a lying header).
    """
    n = len(payload) if declared_length is None else declared_length
    b0 = (0x80 if fin else 0) | ((rsv & 7) << 4) | (opcode & 0xF)
    mbit = 0x80 if mask else 0
    if length_bytes is None:
        length_bytes = 0 if n <= 125 else (2 if n <= 0xFFFF else 8)
    if length_bytes == 0:
        if n > 125:
            raise ValueError("7-bit length cannot hold %d" % n)
        head = struct.pack("!BB", b0, mbit | n)
    elif length_bytes == 2:
        head = struct.pack("!BBH", b0, mbit | 126, n)
    elif length_bytes == 8:
        head = struct.pack("!BBQ", b0, mbit | 127, n)
    else:
        raise ValueError("length_bytes must be 0, 2 or 8")
    if mask:
        key = mask_key if mask_key is not None else os.urandom(4)
        return head + key + mask_bytes(payload, key)
    return head + payload


def close_payload(code: int | None = None, reason: bytes | str = b"") -> bytes:
    if code is None:
        return b""
    if isinstance(reason, str):
        reason = reason.encode()
    return struct.pack("!H", code) + reason


@dataclass
class Frame:
    fin: bool
    rsv: int
    opcode: int
    payload: bytes
    masked: bool = False
    length_bytes: int = 0

    @property
    def close_code(self) -> int | None:
        if self.opcode != OP_CLOSE:
            raise ValueError("not a close frame")
        if len(self.payload) >= 2:
            return struct.unpack("!H", self.payload[:2])[0]
        return None

    @property
    def close_reason(self) -> bytes:
        return self.payload[2:]

    def __repr__(self) -> str:  # keep assertion messages short
        p = self.payload if len(self.payload) <= 40 else self.payload[:40] + b"..."
        return f"Frame(op={self.opcode:#x}, fin={self.fin}, rsv={self.rsv}, len={len(self.payload)}, {p!r})"


@dataclass
class HTTPResponse:
    status: int
    reason: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    raw_head: bytes = b""

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def header_all(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]


# When set (an ssl.SSLContext), every RawClient speaks TLS: the conformance cases
# then run against the relay's TLS listener.
TLS_CONTEXT = None


class RawClient:
    """One TCP connection driven byte by byte."""

    def __init__(
        self,
        port: int,
        host: str = "127.0.0.1",
        *,
        timeout: float = DEFAULT_TIMEOUT,
        rcvbuf: int | None = None,
        sndbuf: int | None = None,
    ):
        self.host = host
        self.port = port
        self.timeout = timeout
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if rcvbuf is not None:  # must be set before connect to bound the window
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if sndbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        if TLS_CONTEXT is not None:  # the same cases over wss:// (test_ws_conformance_tls.py)
            self.sock = TLS_CONTEXT.wrap_socket(self.sock, server_hostname="localhost")
        self.buf = bytearray()
        self.eof: str | None = None  # "eof" or "reset" once the peer has closed
        self.handshake_response: HTTPResponse | None = None
        self.auto_pong = True  # answer server-initiated pings seen while reading
        self.pings_seen: list[bytes] = []

    # ---- raw bytes -------------------------------------------------------
    def send(self, data: bytes, *, chunks: int | list[int] | None = None,
             pause: float = 0.0, ignore_errors: bool = False) -> bool:
        """Send data, optionally cut into chunks (a size or a list of sizes).

        Returns False if the peer had closed (only when ignore_errors)."""
        pieces: list[bytes]
        if chunks is None:
            pieces = [data]
        elif isinstance(chunks, int):
            pieces = [data[i:i + chunks] for i in range(0, len(data), chunks)] or [b""]
        else:
            pieces, off = [], 0
            for c in chunks:
                pieces.append(data[off:off + c])
                off += c
            if off < len(data):
                pieces.append(data[off:])
        try:
            for i, p in enumerate(pieces):
                if p:
                    self.sock.sendall(p)
                if pause and i + 1 < len(pieces):
                    # The pause is the stimulus (separate TCP segments), not a
                    # synchronisation; but stop early if the peer closes.
                    self._wait_readable_or_time(pause)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            if not ignore_errors:
                raise
            return False
        return True

    def _wait_readable_or_time(self, seconds: float) -> None:
        select.select([self.sock], [], [], seconds)

    def _fill(self, deadline: float) -> None:
        """Read at least one more byte into self.buf, or raise."""
        if self.eof:
            raise ConnectionClosed(self.eof, bytes(self.buf))
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ReadTimeout("timed out waiting for bytes")
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise ReadTimeout("timed out waiting for bytes") from None
        except (ConnectionResetError, ConnectionAbortedError):
            self.eof = "reset"
            raise ConnectionClosed("reset", bytes(self.buf)) from None
        except ssl.SSLError:
            # Over TLS, a TCP end without close_notify (the relay's abrupt closes).
            self.eof = "eof"
            raise ConnectionClosed("eof", bytes(self.buf)) from None
        finally:
            self.sock.settimeout(self.timeout)
        if not data:
            self.eof = "eof"
            raise ConnectionClosed("eof", bytes(self.buf))
        self.buf += data

    def read_exact(self, n: int, deadline: float) -> bytes:
        while len(self.buf) < n:
            self._fill(deadline)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_until(self, marker: bytes, deadline: float, limit: int = 1 << 20) -> bytes:
        while True:
            i = self.buf.find(marker)
            if i >= 0:
                out = bytes(self.buf[: i + len(marker)])
                del self.buf[: i + len(marker)]
                return out
            if len(self.buf) > limit:
                raise ServerViolation("no %r within %d bytes" % (marker, limit))
            self._fill(deadline)

    def read_available(self, timeout: float = 0.2) -> bytes:
        """Whatever arrives within `timeout` (used only to assert silence)."""
        deadline = time.monotonic() + timeout
        try:
            self._fill(deadline)
        except (ReadTimeout, ConnectionClosed):
            pass
        out = bytes(self.buf)
        self.buf.clear()
        return out

    def wait_tcp_close(self, timeout: float = DEFAULT_TIMEOUT, *, discard: bool = True) -> str:
        """Wait until the peer closes TCP; returns "eof" or "reset".

        Bytes that arrive meanwhile are discarded (discard=True) or fail the wait."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._fill(deadline)
            except ConnectionClosed as e:
                return e.how
            except ReadTimeout:
                raise ReadTimeout(f"TCP connection still open after {timeout}s") from None
            if not discard:
                raise ServerViolation(f"unexpected bytes before TCP close: {bytes(self.buf[:64])!r}")
            self.buf.clear()

    def is_closed_within(self, timeout: float) -> bool:
        try:
            self.wait_tcp_close(timeout)
            return True
        except ReadTimeout:
            return False

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- HTTP ------------------------------------------------------------
    def read_http_response(self, timeout: float | None = None, *, body: bool = True) -> HTTPResponse:
        deadline = time.monotonic() + (timeout or self.timeout)
        head = self.read_until(b"\r\n\r\n", deadline, limit=64 * 1024)
        lines = head[:-4].split(b"\r\n")
        parts = lines[0].decode("latin-1").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ServerViolation(f"bad status line {lines[0]!r}")
        status = int(parts[1])
        resp = HTTPResponse(status, parts[2] if len(parts) > 2 else "", raw_head=head)
        for line in lines[1:]:
            k, sep, v = line.decode("latin-1").partition(":")
            if not sep:
                raise ServerViolation(f"bad header line {line!r}")
            resp.headers.append((k.strip(), v.strip()))
        if body and status != 101:
            cl = resp.header("Content-Length")
            if cl is not None:
                resp.body = self.read_exact(int(cl), deadline)
            elif (resp.header("Transfer-Encoding") or "").lower() == "chunked":
                resp.body = self._read_chunked(deadline)
            # else: no length → no body we can delimit without waiting for EOF
        return resp

    def _read_chunked(self, deadline: float) -> bytes:
        out = bytearray()
        while True:
            line = self.read_until(b"\r\n", deadline)
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                self.read_until(b"\r\n", deadline)
                return bytes(out)
            out += self.read_exact(size, deadline)
            self.read_exact(2, deadline)

    def request(self, raw: bytes, timeout: float | None = None) -> HTTPResponse:
        self.send(raw)
        return self.read_http_response(timeout)

    def handshake(
        self,
        path: str = "/v1/echo",
        *,
        headers: dict[str, str] | list[tuple[str, str]] | None = None,
        omit: tuple[str, ...] = (),
        version: str = "13",
        protocols: list[str] | None = None,
        key: str | None = None,
        method: str = "GET",
        http_version: str = "HTTP/1.1",
        expect_status: int | None = 101,
        timeout: float | None = None,
    ) -> HTTPResponse:
        """Send an upgrade request and read the response head.

        `omit` drops default headers by (case-insensitive) name; `headers` adds
        or replaces. With expect_status=101 the 101 response is validated
        (Upgrade, Connection, Sec-WebSocket-Accept, no extensions)."""
        key = key if key is not None else base64.b64encode(os.urandom(16)).decode()
        hdrs: list[tuple[str, str]] = [
            ("Host", f"{self.host}:{self.port}"),
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", key),
            ("Sec-WebSocket-Version", version),
        ]
        if protocols:
            hdrs.append(("Sec-WebSocket-Protocol", ", ".join(protocols)))
        extra = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
        names = {k.lower() for k, _ in extra} | {o.lower() for o in omit}
        hdrs = [(k, v) for k, v in hdrs if k.lower() not in names] + extra
        req = f"{method} {path} {http_version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs) + "\r\n"
        self.send(req.encode("latin-1"))
        resp = self.read_http_response(timeout, body=True)
        self.handshake_response = resp
        if expect_status is not None:
            assert resp.status == expect_status, f"expected HTTP {expect_status}, got {resp.status}: {resp.raw_head!r}"
        if resp.status == 101:
            assert (resp.header("Upgrade") or "").lower() == "websocket", resp.raw_head
            assert "upgrade" in (resp.header("Connection") or "").lower(), resp.raw_head
            assert resp.header("Sec-WebSocket-Accept") == accept_key(key), resp.raw_head
            assert resp.header("Sec-WebSocket-Extensions") is None, "server negotiated an extension: %r" % resp.raw_head
        return resp

    # ---- frames ----------------------------------------------------------
    def send_frame(self, opcode: int, payload: bytes = b"", *, chunks=None, pause: float = 0.0,
                   ignore_errors: bool = False, **kw) -> bool:
        return self.send(build_frame(opcode, payload, **kw), chunks=chunks, pause=pause,
                         ignore_errors=ignore_errors)

    def send_text(self, text: str | bytes, **kw) -> bool:
        return self.send_frame(OP_TEXT, text.encode() if isinstance(text, str) else text, **kw)

    def send_binary(self, data: bytes, **kw) -> bool:
        return self.send_frame(OP_BINARY, data, **kw)

    def send_close(self, code: int | None = 1000, reason: bytes | str = b"", *, ignore_errors: bool = True) -> bool:
        return self.send_frame(OP_CLOSE, close_payload(code, reason), ignore_errors=ignore_errors)

    def recv_frame(self, timeout: float | None = None) -> Frame:
        """Read one frame (strictly validated as a server frame).

        Server pings are recorded and answered (auto_pong) and skipped, since the
        server may send heartbeat pings at any time."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while True:
            f = self._recv_one(deadline)
            if f.opcode == OP_PING and self.auto_pong:
                self.pings_seen.append(f.payload)
                self.send_frame(OP_PONG, f.payload, ignore_errors=True)
                continue
            return f

    def _recv_one(self, deadline: float) -> Frame:
        b0, b1 = self.read_exact(2, deadline)
        fin, rsv, opcode = bool(b0 & 0x80), (b0 >> 4) & 7, b0 & 0xF
        masked, n = bool(b1 & 0x80), b1 & 0x7F
        length_bytes = 0
        if n == 126:
            length_bytes = 2
            n = struct.unpack("!H", self.read_exact(2, deadline))[0]
            if n <= 125:
                raise ServerViolation(f"non-minimal 16-bit length {n}")
        elif n == 127:
            length_bytes = 8
            n = struct.unpack("!Q", self.read_exact(8, deadline))[0]
            if n <= 0xFFFF or n >> 63:
                raise ServerViolation(f"non-minimal or invalid 64-bit length {n}")
        if masked:
            raise ServerViolation("server frame is masked (RFC 6455 §5.1)")
        if rsv:
            raise ServerViolation(f"server frame has RSV bits {rsv:#x} set")
        if opcode not in (0, 1, 2, 8, 9, 10):
            raise ServerViolation(f"server frame has reserved opcode {opcode:#x}")
        if opcode >= 8 and (n > 125 or not fin):
            raise ServerViolation(f"bad server control frame (len {n}, fin {fin})")
        payload = self.read_exact(n, deadline)
        return Frame(fin, rsv, opcode, payload, masked, length_bytes)

    def recv_message(self, timeout: float | None = None) -> tuple[int, bytes]:
        """Read one complete data message (reassembling fragments).

        Returns (opcode, payload). Raises ServerViolation on a control frame
        other than a ping (a close or pong here is reported to the caller
        by raising UnexpectedFrame)."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        first: int | None = None
        parts: list[bytes] = []
        while True:
            f = self.recv_frame(max(0.0, deadline - time.monotonic()))
            if f.opcode >= 8:
                raise UnexpectedFrame(f)
            if first is None:
                if f.opcode == OP_CONT:
                    raise ServerViolation("server sent a continuation frame with no message started")
                first = f.opcode
            elif f.opcode != OP_CONT:
                raise ServerViolation("server started a new message inside a fragmented one")
            parts.append(f.payload)
            if f.fin:
                return first, b"".join(parts)

    def expect_close(self, code: int | None, timeout: float | None = None, *,
                     reply: bool = True, allow_data_before: bool = False) -> Frame:
        """The next frame must be a close carrying `code` (None: no payload).

        Then (reply=True) answer it and require the server to close TCP."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while True:
            try:
                f = self.recv_frame(max(0.0, deadline - time.monotonic()))
            except ConnectionClosed as e:
                raise AssertionError(
                    f"expected close frame {code}, but TCP closed ({e.how}) without one") from None
            except ReadTimeout:
                raise AssertionError(f"expected close frame {code}, got nothing within the timeout") from None
            if f.opcode == OP_CLOSE:
                break
            if not (allow_data_before and f.opcode in (OP_TEXT, OP_BINARY, OP_CONT, OP_PONG)):
                raise AssertionError(f"expected close frame {code}, got {f!r}")
        assert f.close_code == code, f"expected close code {code}, got {f.close_code} (reason {f.close_reason!r})"
        if f.close_code is not None:
            try:
                f.close_reason.decode("utf-8")
            except UnicodeDecodeError:
                raise ServerViolation(f"server close reason is not UTF-8: {f.close_reason!r}") from None
        if reply:
            self.send_close(code if code is not None else None)
            self.wait_tcp_close(max(0.5, deadline - time.monotonic()) + 2.0)
        return f

    def close_handshake(self, code: int = 1000, reason: bytes | str = b"", timeout: float | None = None) -> Frame:
        """Client-initiated close: send close, expect the echoed code, expect TCP close."""
        self.send_close(code, reason, ignore_errors=False)
        f = self.expect_close(code, timeout, reply=False)
        self.wait_tcp_close(timeout or self.timeout)
        return f


class UnexpectedFrame(AssertionError):
    def __init__(self, frame: Frame):
        msg = f"expected a data message, got {frame!r}"
        if frame.opcode == OP_CLOSE:
            msg += f" (close code {frame.close_code}, reason {frame.close_reason!r})"
        super().__init__(msg)
        self.frame = frame


def connect(port: int, path: str = "/v1/echo", **kw) -> RawClient:
    """Open a connection and complete a WebSocket handshake."""
    hs_keys = {"headers", "omit", "version", "protocols", "key", "expect_status"}
    hs = {k: kw.pop(k) for k in list(kw) if k in hs_keys}
    c = RawClient(port, **kw)
    try:
        c.handshake(path, **hs)
    except BaseException:
        c.close()
        raise
    return c


def http_get(port: int, path: str, timeout: float = DEFAULT_TIMEOUT,
             extra: str = "") -> HTTPResponse:
    """One plain HTTP/1.1 GET with Connection: close."""
    with RawClient(port, timeout=timeout) as c:
        return c.request(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}Connection: close\r\n\r\n".encode())
