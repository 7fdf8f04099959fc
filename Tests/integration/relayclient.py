"""Small helpers for talking the relay protocol from tests (websockets client)."""
from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time

import websockets

TIMEOUT = 5.0


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_jwt(secret: str, claims: dict, alg: str = "HS256", sign_with: str | None = None) -> str:
    """HS256 per RFC 7515/7519, written here so tests do not trust the relay's own code."""
    header = b64url(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    payload = b64url(json.dumps(claims).encode())
    signing_input = f"{header}.{payload}".encode()
    if alg == "none":
        return f"{header}.{payload}."
    sig = hmac.new((sign_with or secret).encode(), signing_input, hashlib.sha256).digest()
    return f"{header}.{payload}.{b64url(sig)}"


def claims(sub: str = "alice", ttl_s: int = 3600, **extra) -> dict:
    now = int(time.time())
    return {"sub": sub, "exp": now + ttl_s, **extra}


class Client:
    """A relay.v1 connection with bounded receives."""

    def __init__(self, ws):
        self.ws = ws

    @classmethod
    async def connect(cls, base_ws: str) -> "Client":
        ws = await websockets.connect(base_ws + "/v1/ws", subprotocols=["relay.v1"], open_timeout=TIMEOUT)
        return cls(ws)

    async def send(self, obj) -> None:
        await self.ws.send(obj if isinstance(obj, str) else json.dumps(obj))

    async def recv(self, timeout: float = TIMEOUT) -> dict:
        raw = await asyncio.wait_for(self.ws.recv(), timeout)
        return json.loads(raw)

    async def recv_type(self, type_: str, timeout: float = TIMEOUT) -> dict:
        """Receives until a message of `type_` arrives (others are skipped)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise TimeoutError(f"no {type_} within {timeout}s")
            msg = await self.recv(left)
            if msg.get("type") == type_:
                return msg

    async def hello_dev(self, uid: str, name: str | None = None, role: str | None = None) -> dict:
        dev = {"uid": uid, "name": name or uid.title()}
        if role:
            dev["role"] = role
        await self.send({"type": "hello", "id": "hello", "dev": dev})
        return await self.recv_type("welcome")

    async def hello_token(self, token: str) -> dict:
        await self.send({"type": "hello", "id": "hello", "token": token})
        return await self.recv()

    async def expect_close(self, timeout: float = TIMEOUT) -> int:
        """Reads until the server closes; returns the close code."""
        try:
            while True:
                await asyncio.wait_for(self.ws.recv(), timeout)
        except websockets.ConnectionClosed as e:
            return e.rcvd.code if e.rcvd else 1006

    async def close(self) -> None:
        await self.ws.close()
