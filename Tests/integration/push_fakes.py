"""Faithful local fakes of the push providers (PROTOCOL.md §9a), which cannot be
reached from the test machine: an APNs fake (TLS, ALPN h2, token auth) and an FCM
fake (OAuth2 token endpoint + HTTP v1 send endpoint). Each checks what the real
provider checks (the JWT's signature with the public key, every header, the topic,
the payload), records every request, and answers on demand: 200, token gone,
429/5xx with retry-after, GOAWAY, or a black hole that never answers.
"""
from __future__ import annotations

import base64
import json
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import h2.errors
import h2.exceptions
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

import tlsutil


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def verify_jwt(token: str, public_key, alg: str) -> tuple[dict, dict]:
    """Header and claims of a compact JWS whose signature `public_key` verifies; raises otherwise."""
    head_b64, claims_b64, sig_b64 = token.split(".")
    header, claims = json.loads(b64url_decode(head_b64)), json.loads(b64url_decode(claims_b64))
    if header.get("alg") != alg:
        raise ValueError(f"alg {header.get('alg')!r}, want {alg}")
    signed, signature = f"{head_b64}.{claims_b64}".encode(), b64url_decode(sig_b64)
    if alg == "ES256":
        if len(signature) != 64:  # RFC 7518 §3.4: r || s, 32 bytes each
            raise ValueError("ES256 signature is not 64 bytes")
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
        public_key.verify(der, signed, ec.ECDSA(hashes.SHA256()))
    else:
        public_key.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
    return header, claims


@dataclass
class Request:
    method: str
    path: str
    headers: dict
    body: bytes
    connection: int
    at: float = field(default_factory=time.monotonic)

    def json(self):
        return json.loads(self.body)


class TLSServer:
    """A TLS server on 127.0.0.1 speaking HTTP/2 (ALPN h2) and HTTP/1.1, one thread per
    connection. `handle(request)` returns (status, headers, body), or None to never answer
    (a black hole), or "goaway" to end the connection with GOAWAY (h2) / a reset."""

    def __init__(self, directory: Path, name: str):
        self.cert, self.key = tlsutil.make_pair(directory, name)
        self.ca = self.cert  # self-signed: the relay trusts it with --tls-ca-file
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(str(self.cert), str(self.key))
        self.ctx.set_alpn_protocols(["h2", "http/1.1"])
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.url = f"https://localhost:{self.port}"
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.requests: list[Request] = []
        self.errors: list[str] = []
        self.connections = 0
        self.alpn: list[str | None] = []
        self.open_sockets: list[socket.socket] = []
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self) -> None:
        self.stopped = True
        self.sock.close()
        with self.lock:
            for s in self.open_sockets:
                try:
                    s.close()
                except OSError:
                    pass

    def handle(self, request: Request):  # overridden
        return 404, [], b""

    def wait_for(self, predicate, timeout: float = 10.0):
        """Waits until predicate(requests) is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                value = predicate(self.requests)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"condition not met; {len(self.requests)} requests, errors {self.errors}")
                self.changed.wait(left)

    def _record(self, request: Request) -> None:
        with self.changed:
            self.requests.append(request)
            self.changed.notify_all()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            conn = self.ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        with self.lock:
            self.connections += 1
            number = self.connections
            self.alpn.append(conn.selected_alpn_protocol())
            self.open_sockets.append(conn)
        try:
            if conn.selected_alpn_protocol() == "h2":
                self._serve_h2(conn, number)
            else:
                self._serve_http1(conn, number)
        except (OSError, ssl.SSLError, h2.exceptions.ProtocolError):
            pass
        finally:
            conn.close()

    def _serve_h2(self, conn, number: int) -> None:
        h2c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        h2c.initiate_connection()
        conn.sendall(h2c.data_to_send())
        streams: dict[int, tuple[dict, bytearray]] = {}
        while not self.stopped:
            data = conn.recv(65536)
            if not data:
                return
            for event in h2c.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    streams[event.stream_id] = (dict(event.headers), bytearray())
                elif isinstance(event, h2.events.DataReceived):
                    streams[event.stream_id][1].extend(event.data)
                    h2c.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    headers, body = streams.pop(event.stream_id)
                    request = Request(headers.get(":method", ""), headers.get(":path", ""), headers, bytes(body), number)
                    answer = self.handle(request)
                    self._record(request)
                    if answer == "goaway":
                        h2c.close_connection(error_code=h2.errors.ErrorCodes.NO_ERROR, last_stream_id=max(event.stream_id - 2, 0))
                        conn.sendall(h2c.data_to_send())
                        return
                    if answer is None:
                        continue  # black hole: the stream stays open, never answered
                    status, extra, payload = answer
                    h2c.send_headers(event.stream_id, [(":status", str(status)), ("content-length", str(len(payload))), *extra])
                    h2c.send_data(event.stream_id, payload, end_stream=True)
            conn.sendall(h2c.data_to_send())

    def _serve_http1(self, conn, number: int) -> None:
        buffer = b""
        while not self.stopped:
            while b"\r\n\r\n" not in buffer:
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
            head, buffer = buffer.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)}
            length = int(headers.get("content-length", "0"))
            while len(buffer) < length:
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
            body, buffer = buffer[:length], buffer[length:]
            request = Request(method, path, headers, body, number)
            answer = self.handle(request)
            self._record(request)
            if answer is None:
                continue
            if answer == "goaway":
                return
            status, extra, payload = answer
            head_out = f"HTTP/1.1 {status} X\r\ncontent-length: {len(payload)}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in extra)
            conn.sendall(head_out.encode() + b"\r\n" + payload)


class Script:
    """Answers on demand: per token a queue of answers (each used once), else a default."""

    def __init__(self, default):
        self.default = default
        self.queued: dict[str, list] = {}
        self.lock = threading.Lock()

    def answer(self, token: str, *answers) -> None:
        with self.lock:
            self.queued.setdefault(token, []).extend(answers)

    def next(self, token: str):
        with self.lock:
            queue = self.queued.get(token)
            if queue:
                return queue.pop(0)
            return self.default


class APNsFake(TLSServer):
    """APNs provider API (HTTP/2, token auth). Answers per token:
    "ok", ("status", code, reason, retry_after), "goaway", "blackhole"."""

    def __init__(self, directory: Path, topic: str = "com.example.app", key_id: str = "KEYID12345", team_id: str = "TEAM123456"):
        super().__init__(directory, "apns")
        self.topic, self.key_id, self.team_id = topic, key_id, team_id
        key = ec.generate_private_key(ec.SECP256R1())
        self.key_file = directory / "AuthKey.p8"
        self.key_file.write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        self.public_key = key.public_key()
        self.script = Script("ok")
        self.jwts: list[str] = []

    def flags(self) -> list[str]:
        return ["--apns-key-file", str(self.key_file), "--apns-key-id", self.key_id, "--apns-team-id", self.team_id,
                "--apns-topic", self.topic, "--apns-url", self.url, "--apns-sandbox-url", self.url + "/sandbox",
                "--tls-ca-file", str(self.ca)]

    def pushes(self, token: str | None = None, push_type: str | None = None) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.path.startswith(("/3/device/", "/sandbox/3/device/"))
                    and (token is None or r.path.endswith("/" + token))
                    and (push_type is None or r.headers.get("apns-push-type") == push_type)]

    def check(self, r: Request) -> str | None:
        """What APNs would refuse in `r` (its reason), else None."""
        h = r.headers
        m = re.fullmatch(r"(/sandbox)?/3/device/([0-9a-fA-F]{64,200})", r.path)
        if r.method != "POST" or not m:
            return "BadPath"
        auth = h.get("authorization", "")
        if not auth.startswith("bearer "):
            return "MissingProviderToken"
        try:
            header, claims = verify_jwt(auth[7:], self.public_key, "ES256")
        except Exception as e:  # noqa: BLE001 - any failure is an invalid token
            self.errors.append(f"jwt: {e}")
            return "InvalidProviderToken"
        if header.get("kid") != self.key_id or claims.get("iss") != self.team_id:
            return "InvalidProviderToken"
        if abs(time.time() - claims.get("iat", 0)) > 3600:
            return "ExpiredProviderToken"
        with self.lock:
            if auth[7:] not in self.jwts:
                self.jwts.append(auth[7:])
        push_type = h.get("apns-push-type")
        if push_type not in ("voip", "alert"):
            return "InvalidPushType"
        if h.get("apns-topic") != (self.topic + ".voip" if push_type == "voip" else self.topic):
            return "DeviceTokenNotForTopic" if h.get("apns-topic") else "MissingTopic"
        if h.get("apns-priority") != "10" or not h.get("apns-expiration", "").isdigit() or not h.get("apns-collapse-id"):
            return "BadPriority" if h.get("apns-priority") != "10" else "BadExpirationDate" if not h.get("apns-expiration", "").isdigit() else "BadCollapseId"
        try:
            body = json.loads(r.body)
        except ValueError:
            return "PayloadEmpty"
        relay = body.get("relay", {})
        if push_type == "voip" and relay.get("type") != "call.incoming":
            return "BadVoipPayload"
        if push_type == "alert" and body.get("aps", {}).get("alert", {}).get("loc-key") not in ("RELAY_INCOMING_CALL", "RELAY_MISSED_CALL"):
            return "BadAlertPayload"
        if relay.get("callId") != h.get("apns-collapse-id"):
            return "BadCollapseId"
        return None

    def handle(self, r: Request):
        reason = self.check(r)
        if reason:
            if reason not in ("DeviceTokenNotForTopic",):
                self.errors.append(f"{reason}: {r.path} {r.headers}")
            return 403 if "ProviderToken" in reason else 400, [("apns-id", "x")], json.dumps({"reason": reason}).encode()
        answer = self.script.next(r.path.rsplit("/", 1)[1])
        if answer == "ok":
            return 200, [("apns-id", "x")], b""
        if answer in ("goaway", "blackhole"):
            return None if answer == "blackhole" else "goaway"
        _, status, reason, retry_after = answer
        extra = [("retry-after", str(retry_after))] if retry_after is not None else []
        return status, extra, json.dumps({"reason": reason}).encode()


class FCMFake(TLSServer):
    """FCM HTTP v1 with its OAuth2 token endpoint. Send answers per token: "ok",
    ("status", code, errorCode, retry_after), "blackhole"."""

    def __init__(self, directory: Path, project: str = "relay-test", expires_in: int = 3600):
        super().__init__(directory, "fcm")
        self.project, self.expires_in = project, expires_in
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_key = key.public_key()
        self.email = f"relay@{project}.iam.gserviceaccount.com"
        self.token_uri = self.url + "/token"
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
        self.credentials = directory / "service-account.json"
        self.credentials.write_text(json.dumps({
            "type": "service_account", "project_id": project, "private_key_id": "k1", "private_key": pem,
            "client_email": self.email, "token_uri": self.token_uri}))
        self.script = Script("ok")
        self.issued: dict[str, float] = {}
        self.token_requests = 0

    def flags(self) -> list[str]:
        return ["--fcm-credentials", str(self.credentials), "--fcm-url", self.url, "--tls-ca-file", str(self.ca)]

    def sends(self, token: str | None = None) -> list[Request]:
        with self.lock:
            out = [r for r in self.requests if r.path.endswith("/messages:send")]
        return [r for r in out if token is None or r.json()["message"]["token"] == token]

    def handle(self, r: Request):
        if r.path == "/token":
            return self.token(r)
        if r.method != "POST" or r.path != f"/v1/projects/{self.project}/messages:send":
            self.errors.append(f"path {r.method} {r.path}")
            return 404, [], b""
        bearer = r.headers.get("authorization", "")
        if not bearer.startswith("Bearer ") or self.issued.get(bearer[7:], 0) < time.monotonic():
            self.errors.append("send without a valid access token")
            return 401, [], json.dumps({"error": {"code": 401, "status": "UNAUTHENTICATED"}}).encode()
        problem = self.check_message(r)
        if problem:
            self.errors.append(problem)
            return 400, [], json.dumps({"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": problem}}).encode()
        answer = self.script.next(r.json()["message"]["token"])
        if answer == "ok":
            return 200, [], json.dumps({"name": f"projects/{self.project}/messages/{len(self.requests)}"}).encode()
        if answer == "blackhole":
            return None
        _, status, code, retry_after = answer
        extra = [("retry-after", str(retry_after))] if retry_after is not None else []
        body = {"error": {"code": status, "status": "NOT_FOUND" if status == 404 else "UNAVAILABLE",
                          "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": code}]}}
        return status, extra, json.dumps(body).encode()

    def check_message(self, r: Request) -> str | None:
        try:
            message = r.json()["message"]
        except (ValueError, KeyError):
            return "body is not {message}"
        android, data = message.get("android", {}), message.get("data", {})
        if not message.get("token") or android.get("priority") != "HIGH" or not re.fullmatch(r"\d+(\.\d+)?s", android.get("ttl", "")):
            return f"bad android/token: {message}"
        if "notification" in message or not all(isinstance(v, str) for v in data.values()):
            return "data values must be strings, no notification"
        if data.get("type") not in ("call.incoming", "call.cancelled") or not data.get("callId"):
            return f"bad data {data}"
        return None

    def token(self, r: Request):
        with self.lock:
            self.token_requests += 1
        form = dict(p.split("=", 1) for p in r.body.decode().split("&"))
        if form.get("grant_type") != "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer":
            self.errors.append(f"grant_type {form.get('grant_type')}")
            return 400, [], b'{"error":"unsupported_grant_type"}'
        try:
            _, claims = verify_jwt(form["assertion"], self.public_key, "RS256")
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"assertion: {e}")
            return 400, [], b'{"error":"invalid_grant"}'
        ok = (claims.get("iss") == self.email and claims.get("aud") == self.token_uri
              and claims.get("scope") == "https://www.googleapis.com/auth/firebase.messaging"
              and 0 < claims.get("exp", 0) - claims.get("iat", 0) <= 3600 and abs(claims["iat"] - time.time()) < 300)
        if not ok:
            self.errors.append(f"assertion claims {claims}")
            return 400, [], b'{"error":"invalid_grant"}'
        token = f"ya29.fake-{self.token_requests}"
        self.issued[token] = time.monotonic() + self.expires_in
        return 200, [("content-type", "application/json")], json.dumps(
            {"access_token": token, "expires_in": self.expires_in, "token_type": "Bearer"}).encode()
