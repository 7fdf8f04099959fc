"""A binary-safe, pipelined Redis client of a few lines, for the cluster tests and
benchmarks (tests write log records and read Redis's memory figures with it)."""
from __future__ import annotations

import socket


def encode(command: list[bytes]) -> bytes:
    """One command as a RESP array of bulk strings."""
    return b"*%d\r\n" % len(command) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in command)


def split_replies(data: bytes, replies: list[bytes]) -> tuple[list[bytes], bytes]:
    """Complete simple replies (status, error, integer, bulk) at the front of `data`."""
    while b"\r\n" in data:
        line, rest = data.split(b"\r\n", 1)
        if line[:1] == b"$" and int(line[1:]) >= 0:
            n = int(line[1:])
            if len(rest) < n + 2:
                break
            replies.append(rest[:n])
            data = rest[n + 2:]
        else:
            replies.append(line)
            data = rest
    return replies, data


def pipeline(port: int, commands: list[list[bytes]], password: str | None = None,
             timeout: float = 60) -> list[bytes]:
    """Sends every command on one connection; the first line (or bulk) of each reply."""
    if password:
        commands = [[b"AUTH", password.encode()]] + commands
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"".join(encode(c) for c in commands))
        data, replies = b"", []
        while len(replies) < len(commands):
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            data += chunk
            replies, data = split_replies(data, replies)
    return replies[1:] if password else replies
