"""Replay the scripted conversations of protocol/scenarios/ against a real relay.

The scenario format is documented in protocol/scenarios/README.md. In short: a
scenario names its clients, and its steps say, in order, what a client sends
and what it must receive next. Every message the server sends is validated
against its JSON Schema (protocol/schema/, chosen by `type`), and for every
client the `seq` of each session's events must be consecutive.

This module has no pytest dependency; test_scenarios.py drives it and
test_schemas.py reuses its schema loading and matching.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_DIR = ROOT / "protocol"
SCHEMA_DIR = PROTOCOL_DIR / "schema"
SCENARIO_DIR = PROTOCOL_DIR / "scenarios"
SCENARIO_FORMAT_SCHEMA = SCHEMA_DIR / "scenario.json"

WS_PATH = "/v1/ws"
SUBPROTOCOL = "relay.v1"
DEFAULT_TIMEOUT_MS = 5000
TRANSCRIPT_TAIL = 8

# Session events carry session/seq/ts and are numbered per session (PROTOCOL.md §2).
SESSION_EVENT_PREFIXES = ("participant.", "hand.")
SESSION_EVENT_TYPES = {"hands.cleared", "message"}


def is_session_event(msg_type: str) -> bool:
    return msg_type in SESSION_EVENT_TYPES or msg_type.startswith(SESSION_EVENT_PREFIXES)


# --------------------------------------------------------------------------- schemas


class Schemas:
    """Every schema under protocol/schema, resolvable by `$id`, validators by message type."""

    def __init__(self, schema_dir: Path = SCHEMA_DIR):
        self.dir = schema_dir
        self.by_path: dict[str, dict] = {}
        for p in sorted(schema_dir.rglob("*.json")):
            rel = p.relative_to(schema_dir).as_posix()
            self.by_path[rel] = json.loads(p.read_text(encoding="utf-8"))
        self.index: dict[str, str] = self.by_path.pop("index.json")
        resources = [
            (s["$id"], Resource.from_contents(s)) for s in self.by_path.values() if "$id" in s
        ]
        self.registry = Registry().with_resources(resources)
        self._validators: dict[str, jsonschema.Draft202012Validator] = {}

    def direction(self, msg_type: str) -> str | None:
        """'command' (client → server), 'event' (server → client) or None if unknown."""
        path = self.index.get(msg_type)
        if path is None:
            return None
        return "command" if path.startswith("commands/") else "event"

    def validator(self, rel_path: str) -> jsonschema.Draft202012Validator:
        v = self._validators.get(rel_path)
        if v is None:
            v = jsonschema.Draft202012Validator(self.by_path[rel_path], registry=self.registry)
            self._validators[rel_path] = v
        return v

    def errors(self, msg: Any, direction: str) -> list[str]:
        """Schema violations of one message that should travel in `direction`."""
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            return ["not a JSON object with a string `type`"]
        t = msg["type"]
        if self.direction(t) != direction:
            return [f"no {direction} schema for type {t!r} (protocol/schema/index.json)"]
        v = self.validator(self.index[t])
        return [
            f"{self.index[t]}: at {_json_path(e.absolute_path)}: {e.message}"
            for e in sorted(v.iter_errors(msg), key=lambda e: list(e.absolute_path))
        ]


def _json_path(parts) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


# --------------------------------------------------------------------------- matching

CAPTURE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


class ScenarioError(Exception):
    """The scenario itself is malformed (not a server failure)."""


def resolve(value: Any, captures: dict[str, Any]) -> Any:
    """Substitute `"$name"` references in a message to send; `"$$x"` is the literal `"$x"`."""
    if isinstance(value, str) and value.startswith("$"):
        if value.startswith("$$"):
            return value[1:]
        name = value[1:]
        if name not in captures:
            raise ScenarioError(f"reference {value!r} to a value not captured yet")
        return captures[name]
    if isinstance(value, dict):
        return {k: resolve(v, captures) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, captures) for v in value]
    return value


def match(expected: Any, actual: Any, captures: dict[str, Any], path: str = "$") -> list[str]:
    """Partial match of `actual` against the pattern `expected`; returns mismatches.

    New captures are written into `captures` (callers pass a copy and keep it only
    when the whole match succeeds).
    """
    if isinstance(expected, str) and expected.startswith("$"):
        if expected.startswith("$$"):
            return _equal(expected[1:], actual, path)
        if expected == "$any":
            return []
        if expected == "$absent":
            return [f"{path}: `$absent` is only valid as an object member's value"]
        if expected.startswith("$capture:"):
            name = expected[len("$capture:"):]
            if not CAPTURE_NAME.match(name):
                raise ScenarioError(f"bad capture name {name!r}")
            if name in captures:
                return _equal(captures[name], actual, path)
            captures[name] = actual
            return []
        name = expected[1:]
        if name not in captures:
            raise ScenarioError(f"{path}: reference {expected!r} to a value not captured yet")
        return _equal(captures[name], actual, path)
    if isinstance(expected, dict):
        if set(expected) == {"$unordered"}:
            return _match_unordered(expected["$unordered"], actual, captures, path)
        if not isinstance(actual, dict):
            return [f"{path}: expected an object, got {_show(actual)}"]
        out: list[str] = []
        for key, want in expected.items():
            if want == "$absent":
                if key in actual:
                    out.append(f"{path}.{key}: expected absent, got {_show(actual[key])}")
            elif key not in actual:
                out.append(f"{path}.{key}: missing (expected {_show(want)})")
            else:
                out.extend(match(want, actual[key], captures, f"{path}.{key}"))
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return [f"{path}: expected an array, got {_show(actual)}"]
        if len(expected) != len(actual):
            return [f"{path}: expected {len(expected)} elements, got {len(actual)}: {_show(actual)}"]
        out = []
        for i, (want, got) in enumerate(zip(expected, actual)):
            out.extend(match(want, got, captures, f"{path}[{i}]"))
        return out
    return _equal(expected, actual, path)


def _match_unordered(expected: list, actual: Any, captures: dict[str, Any], path: str) -> list[str]:
    if not isinstance(actual, list):
        return [f"{path}: expected an array, got {_show(actual)}"]
    if len(expected) != len(actual):
        return [f"{path}: expected {len(expected)} elements (any order), got {len(actual)}: {_show(actual)}"]
    remaining = list(range(len(actual)))
    for i, want in enumerate(expected):
        for j in remaining:
            trial = dict(captures)
            if not match(want, actual[j], trial):
                captures.update(trial)
                remaining.remove(j)
                break
        else:
            return [f"{path}: no element matches {_show(want)} (any order): {_show(actual)}"]
    return []


def _equal(expected: Any, actual: Any, path: str) -> list[str]:
    # bool is an int in Python: keep true and 1 apart.
    if expected == actual and isinstance(expected, bool) == isinstance(actual, bool):
        return []
    return [f"{path}: expected {_show(expected)}, got {_show(actual)}"]


def _show(v: Any, limit: int = 300) -> str:
    s = json.dumps(v, ensure_ascii=False, sort_keys=False)
    return s if len(s) <= limit else s[: limit - 3] + "..."


# --------------------------------------------------------------------------- clients


class ScenarioFailure(AssertionError):
    pass


@dataclass
class Received:
    kind: str  # "message", "close", "invalid"
    value: Any = None  # message dict / close code / raw text or bytes
    reason: str = ""


@dataclass
class Client:
    name: str
    spec: dict
    runner: "ScenarioRunner"
    ws: Any = None
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    reader: asyncio.Task | None = None
    transcript: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    last_seq: dict[str, int] = field(default_factory=dict)
    last_raised_at: dict[str, int] = field(default_factory=dict)
    closed: bool = False
    silenced: bool = False

    async def connect(self) -> None:
        from websockets.asyncio.client import connect

        url = self.runner.base_url + WS_PATH
        try:
            self.ws = await asyncio.wait_for(
                connect(
                    url,
                    subprotocols=[SUBPROTOCOL],
                    open_timeout=self.runner.timeout_s,
                    close_timeout=self.runner.timeout_s,
                    ping_interval=None,
                    max_size=None,
                ),
                self.runner.timeout_s + 1,
            )
        except Exception as e:  # noqa: BLE001 - reported as a scenario failure
            raise ScenarioFailure(f"client {self.name}: could not connect to {url}: {e!r}") from e
        if self.ws.subprotocol != SUBPROTOCOL:
            raise ScenarioFailure(
                f"client {self.name}: server selected subprotocol {self.ws.subprotocol!r}, expected {SUBPROTOCOL!r}"
            )
        self.reader = asyncio.create_task(self._read(), name=f"reader-{self.name}")

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for raw in self.ws:
                self._receive(raw)
        except ConnectionClosed:
            pass
        rcvd = self.ws.close_code
        code = rcvd if rcvd is not None else 1006
        self.transcript.append(f"<< close {code} {self.ws.close_reason or ''}".rstrip())
        self.queue.put_nowait(Received("close", code, self.ws.close_reason or ""))

    def _receive(self, raw: str | bytes) -> None:
        if isinstance(raw, bytes):
            self.transcript.append(f"<< binary {raw[:60]!r}")
            self.violations.append(f"server sent a binary message: {raw[:60]!r}")
            self.queue.put_nowait(Received("invalid", raw))
            return
        self.transcript.append(f"<< {raw[:400]}")
        try:
            msg = json.loads(raw)
        except ValueError:
            self.violations.append(f"server sent text that is not JSON: {raw[:200]!r}")
            self.queue.put_nowait(Received("invalid", raw))
            return
        for err in self.runner.schemas.errors(msg, "event"):
            self.violations.append(f"schema violation in {_show(msg)}: {err}")
        if isinstance(msg, dict):
            self._check_sequence(msg)
        self.queue.put_nowait(Received("message", msg))

    def _check_sequence(self, msg: dict) -> None:
        """Per client and session: seq consecutive, raisedAt never decreasing."""
        t, sid, seq = msg.get("type"), msg.get("session"), msg.get("seq")
        if not isinstance(t, str) or not isinstance(sid, str):
            return
        if t == "session.joined":
            self.last_seq[sid] = seq
            hands = msg.get("hands") or []
            self.last_raised_at[sid] = max((h.get("raisedAt", 0) for h in hands if isinstance(h, dict)), default=0)
        elif t == "session.resumed":
            if sid in self.last_seq and self.last_seq[sid] != seq:
                self.violations.append(
                    f"session.resumed for {sid!r} says seq {seq}, but the last event received had seq {self.last_seq[sid]}"
                )
            self.last_seq[sid] = seq
        elif t in ("session.left", "session.timed_out"):
            self.last_seq.pop(sid, None)
            self.last_raised_at.pop(sid, None)
        elif is_session_event(t):
            if sid not in self.last_seq:
                self.violations.append(f"{t} (seq {seq}) for session {sid!r}, which this connection has not joined")
                return
            want = self.last_seq[sid] + 1
            if seq != want:
                self.violations.append(f"{t} for session {sid!r} has seq {seq}, expected {want} (gap or duplicate)")
            self.last_seq[sid] = seq if isinstance(seq, int) else want
            if t == "hand.raised" and isinstance(msg.get("raisedAt"), int):
                prev = self.last_raised_at.get(sid, 0)
                if msg["raisedAt"] < prev:
                    self.violations.append(f"hand.raised raisedAt {msg['raisedAt']} is earlier than the previous {prev}")
                self.last_raised_at[sid] = msg["raisedAt"]

    async def send_text(self, text: str | bytes) -> None:
        self.transcript.append(f">> {text[:400]!s}" if isinstance(text, str) else f">> binary {text[:60]!r}")
        try:
            await asyncio.wait_for(self.ws.send(text), self.runner.timeout_s)
        except Exception as e:  # noqa: BLE001
            raise ScenarioFailure(f"client {self.name}: send failed: {e!r}") from e

    async def next(self, timeout_s: float) -> Received | None:
        try:
            return await asyncio.wait_for(self.queue.get(), timeout_s)
        except asyncio.TimeoutError:
            return None

    async def shutdown(self) -> None:
        if self.ws is not None and self.silenced:
            self.ws.transport.abort()
        elif self.ws is not None:
            try:
                await asyncio.wait_for(self.ws.close(), 2)
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass
        if self.reader is not None:
            try:
                await asyncio.wait_for(self.reader, 2)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self.reader.cancel()


# --------------------------------------------------------------------------- runner


class ScenarioRunner:
    def __init__(self, scenario: dict, base_url: str, schemas: Schemas | None = None):
        self.scenario = scenario
        self.base_url = base_url.rstrip("/")
        self.schemas = schemas or Schemas()
        self.timeout_s = scenario.get("timeoutMs", DEFAULT_TIMEOUT_MS) / 1000
        self.captures: dict[str, Any] = mint_tokens(scenario)
        self.clients: dict[str, Client] = {
            name: Client(name, spec or {}, self) for name, spec in scenario["clients"].items()
        }
        self.step_no = 0

    async def run(self) -> None:
        try:
            for name, client in self.clients.items():
                if not client.spec.get("lazy", False):
                    await self._connect(client)
            for step in self.scenario["steps"]:
                await self._step(step)
            self._check_leftovers()
        finally:
            await asyncio.gather(*(c.shutdown() for c in self.clients.values()))

    # ---- steps

    async def _step(self, step: dict, repeat_index: int | None = None) -> None:
        if "repeat" in step:
            for i in range(step["repeat"]):
                for inner in step["steps"]:
                    text = json.dumps(inner).replace("{i}", str(i + 1))
                    await self._step(json.loads(text))
            return
        self.step_no += 1
        client = self._client(step)
        self._raise_violations(client, step)
        if "connect" in step:
            await self._connect(client)
        elif "send" in step:
            msg = resolve(step["send"], self.captures)
            errs = self.schemas.errors(msg, "command")
            if errs:
                raise ScenarioError(f"step {self.step_no}: `send` is not a valid command ({errs}); use sendRaw")
            self._note_resume(client, msg)
            await client.send_text(json.dumps(msg))
        elif "sendRaw" in step:
            raw = step["sendRaw"]
            await client.send_text(raw if isinstance(raw, str) else json.dumps(resolve(raw, self.captures)))
        elif "sendBinary" in step:
            await client.send_text(bytes.fromhex(step["sendBinary"]))
        elif "expect" in step:
            await self._expect(client, step)
        elif "expectClose" in step:
            await self._expect_close(client, step)
        elif "expectUnordered" in step:
            await self._expect_unordered(client, step)
        elif "expectNothing" in step:
            await self._expect_nothing(client, step)
        elif "silence" in step:
            # Stop reading: WebSocket pings go unanswered, as with a frozen or unplugged device.
            client.transcript.append(">> silence (stop reading)")
            client.ws.transport.pause_reading()
            client.silenced = True
        elif "drop" in step:
            client.transcript.append(">> drop (TCP abort, no close handshake)")
            client.ws.transport.abort()
            await self._expect_close(client, {"expectClose": None})
        elif "close" in step:
            code = step["close"] if isinstance(step["close"], int) else 1000
            client.transcript.append(f">> close {code}")
            await asyncio.wait_for(client.ws.close(code), self.timeout_s + 1)
            await self._expect_close(client, {"expectClose": None})
        else:
            raise ScenarioError(f"step {self.step_no}: no action in {_show(step)}")
        self._raise_violations(client, step)

    def _client(self, step: dict) -> Client:
        name = step.get("client")
        if name not in self.clients:
            raise ScenarioError(f"step {self.step_no}: unknown client {name!r}")
        return self.clients[name]

    async def _connect(self, client: Client) -> None:
        await client.connect()
        hello = client.spec.get("hello")
        if hello is None:
            return
        msg = resolve({"type": "hello", **hello}, self.captures)
        self._note_resume(client, msg)
        await client.send_text(json.dumps(msg))
        pattern = {"type": "welcome", **client.spec.get("welcome", {})}
        got = await self._expect(client, {"client": client.name, "expect": pattern}, context="automatic hello")
        for key in ("connectionId", "resumeToken"):
            self.captures[f"{client.name}.{key}"] = got.get(key)
        self.captures[f"{client.name}.uid"] = (got.get("user") or {}).get("uid")

    @staticmethod
    def _note_resume(client: Client, msg: dict) -> None:
        """A resuming hello tells the server which seq the client has seen: track from there."""
        if msg.get("type") == "hello" and isinstance(msg.get("resume"), dict):
            for sid, seq in (msg["resume"].get("sessions") or {}).items():
                client.last_seq[sid] = seq

    def _timeout(self, step: dict) -> float:
        return step.get("timeoutMs", self.timeout_s * 1000) / 1000

    async def _expect(self, client: Client, step: dict, context: str = "") -> dict:
        pattern = step["expect"]
        got = await client.next(self._timeout(step))
        where = f"expect {_show(pattern)}" + (f" ({context})" if context else "")
        if got is None:
            self._fail(client, step, f"{where}: nothing arrived within {self._timeout(step) * 1000:.0f} ms")
        if got.kind == "close":
            self._fail(client, step, f"{where}: the connection was closed with {got.value} {got.reason!r}")
        if got.kind != "message":
            self._fail(client, step, f"{where}: got an invalid message {got.value!r}")
        trial = dict(self.captures)
        mismatches = match(pattern, got.value, trial)
        if mismatches:
            self._fail(
                client,
                step,
                f"{where}\n  got:      {_show(got.value, 2000)}\n  mismatches:\n    " + "\n    ".join(mismatches),
            )
        self.captures = trial
        return got.value

    async def _expect_unordered(self, client: Client, step: dict) -> None:
        """The next len(patterns) messages match the patterns, in any order."""
        pending = list(step["expectUnordered"])
        while pending:
            got = await client.next(self._timeout(step))
            where = f"expectUnordered, still waiting for {_show(pending)}"
            if got is None:
                self._fail(client, step, f"{where}: nothing arrived within {self._timeout(step) * 1000:.0f} ms")
            if got.kind != "message":
                self._fail(client, step, f"{where}: got {got.kind} {got.value!r}")
            for i, pattern in enumerate(pending):
                trial = dict(self.captures)
                if not match(pattern, got.value, trial):
                    self.captures = trial
                    del pending[i]
                    break
            else:
                self._fail(client, step, f"{where}\n  got:      {_show(got.value, 2000)} (matches none)")

    async def _expect_close(self, client: Client, step: dict) -> None:
        want = step["expectClose"]
        got = await client.next(self._timeout(step))
        if got is None:
            self._fail(client, step, f"expected close {want}: still open after {self._timeout(step) * 1000:.0f} ms")
        if got.kind != "close":
            self._fail(client, step, f"expected close {want}, got message {_show(got.value, 2000)}")
        if want is not None and got.value != want:
            self._fail(client, step, f"expected close code {want}, got {got.value} {got.reason!r}")
        client.closed = True

    async def _expect_nothing(self, client: Client, step: dict) -> None:
        wait_s = step["expectNothing"] / 1000
        got = await client.next(wait_s)
        if got is not None:
            what = f"close {got.value}" if got.kind == "close" else _show(got.value, 2000)
            self._fail(client, step, f"expected nothing for {step['expectNothing']} ms, got {what}")

    def _check_leftovers(self) -> None:
        for client in self.clients.values():
            left = []
            while not client.queue.empty():
                item = client.queue.get_nowait()
                if item.kind != "close":
                    left.append(_show(item.value))
            if left:
                self._fail(client, {}, "messages arrived that no step expected:\n    " + "\n    ".join(left))
            self._raise_violations(client, {})

    def _raise_violations(self, client: Client, step: dict) -> None:
        if client.violations:
            self._fail(client, step, "protocol violations:\n    " + "\n    ".join(client.violations))

    def _fail(self, client: Client, step: dict, what: str) -> None:
        tail = "\n    ".join(client.transcript[-TRANSCRIPT_TAIL:]) or "(nothing)"
        note = f" — {step['note']}" if step.get("note") else ""
        raise ScenarioFailure(
            f"scenario {self.scenario['name']!r}, step {self.step_no}, client {client.name}{note}:\n"
            f"  {what}\n  {client.name}'s last frames:\n    {tail}"
        )


def server_flags(scenario: dict) -> list[str]:
    """The `relay serve` flags of a scenario: its `flags`, plus `--secret` in token mode."""
    flags = list(scenario.get("flags", []))
    if "secret" in scenario:
        flags += ["--secret", scenario["secret"]]
    return flags


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def mint_tokens(scenario: dict, now_s: int | None = None) -> dict[str, str]:
    """Captures `jwt.<name>` for every entry of the scenario's `tokens`.

    An entry holds the JWT claims, plus controls: `$expInMs` (exp relative to now,
    default 3 600 000; negative = already expired), `$nbfInMs`, `$alg` (default
    HS256; "none" gives an unsigned token), `$secret` (sign with another secret) and
    `$omit` (claims to leave out, e.g. ["exp"]).
    """
    now_s = int(time.time()) if now_s is None else now_s
    out = {}
    for name, spec in scenario.get("tokens", {}).items():
        claims = {k: v for k, v in spec.items() if not k.startswith("$")}
        claims.setdefault("exp", now_s + spec.get("$expInMs", 3_600_000) // 1000)
        if "$nbfInMs" in spec:
            claims["nbf"] = now_s + spec["$nbfInMs"] // 1000
        claims.setdefault("iat", now_s)
        for omitted in spec.get("$omit", []):
            claims.pop(omitted, None)
        alg = spec.get("$alg", "HS256")
        head = _b64url(json.dumps({"alg": alg, "typ": "JWT"}).encode())
        body = _b64url(json.dumps(claims).encode())
        signing_input = f"{head}.{body}".encode()
        if alg == "none":
            signature = ""
        else:
            key = spec.get("$secret", scenario.get("secret", "")).encode()
            signature = _b64url(hmac.new(key, signing_input, hashlib.sha256).digest())
        out[f"jwt.{name}"] = f"{head}.{body}.{signature}"
    return out


def load_scenarios(directory: Path = SCENARIO_DIR) -> list[Path]:
    return sorted(directory.glob("*.json"))


async def run_scenario(scenario: dict, base_url: str, schemas: Schemas | None = None) -> None:
    await ScenarioRunner(scenario, base_url, schemas).run()
