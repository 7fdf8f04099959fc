"""Static checks of protocol/: schemas, examples and scenario files. No server needed.

- every schema under protocol/schema is a valid JSON Schema (draft 2020-12) and
  every `$ref` in it resolves;
- protocol/schema/index.json maps every message type to its schema and back;
- every example message in protocol/ (```json and ```conversation blocks of the
  Markdown files) validates against the schema of its `type`, and every message
  type has at least one example in PROTOCOL.md;
- every scenario file follows the scenario format, every message it sends is a
  valid command and every message it expects names a server message type.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from scenario_runner import (
    PROTOCOL_DIR,
    SCHEMA_DIR,
    SCENARIO_FORMAT_SCHEMA,
    Schemas,
    load_scenarios,
)

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_FILES = sorted(p for p in SCHEMA_DIR.rglob("*.json") if p.name != "index.json")
MARKDOWN_FILES = sorted(PROTOCOL_DIR.rglob("*.md"))
SCENARIOS = load_scenarios()

FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.S | re.M)
CONVERSATION_LINE = re.compile(r"^(?P<who>[A-Za-z0-9_.-]+)\s+(?P<dir>→!|→|←)\s+(?P<body>.+)$")
CLOSE_LINE = re.compile(r"^close \d{4}( .*)?$")


@pytest.fixture(scope="module")
def schemas() -> Schemas:
    return Schemas()


def _rel(p: Path) -> str:
    return p.relative_to(PROTOCOL_DIR).as_posix()


# --------------------------------------------------------------------------- schemas


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=[_rel(p) for p in SCHEMA_FILES])
def test_schema_is_valid_draft_2020_12(path: Path, schemas: Schemas) -> None:
    schema = json.loads(path.read_text(encoding="utf-8"))
    assert schema.get("$schema") == DRAFT_2020_12, f"{_rel(path)}: $schema must be {DRAFT_2020_12}"
    jsonschema.Draft202012Validator.check_schema(schema)
    rel = path.relative_to(SCHEMA_DIR).as_posix()
    assert schema.get("$id", "").endswith("/" + rel), f"{_rel(path)}: $id must end with its path"
    resolver = schemas.registry.resolver(base_uri=schema["$id"])
    for ref in _refs(schema):
        resolver.lookup(ref)  # raises if the reference does not resolve


def _refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                yield v
            else:
                yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def test_index_maps_every_message_type(schemas: Schemas) -> None:
    message_files = {
        p.relative_to(SCHEMA_DIR).as_posix()
        for p in SCHEMA_FILES
        if p.parent.name in ("commands", "events")
    }
    assert set(schemas.index.values()) == message_files, "index.json and commands/ + events/ differ"
    for msg_type, rel in schemas.index.items():
        schema = schemas.by_path[rel]
        assert schema["properties"]["type"] == {"const": msg_type}, f"{rel}: type const is not {msg_type!r}"
        assert "type" in schema["required"], f"{rel}: `type` must be required"
        assert schema.get("additionalProperties", True) is not False, f"{rel}: must allow unknown fields"


def test_session_events_require_session_seq_ts(schemas: Schemas) -> None:
    from scenario_runner import is_session_event

    session_events = [t for t in schemas.index if schemas.direction(t) == "event" and is_session_event(t)]
    assert len(session_events) == 9, session_events
    for t in session_events:
        schema = schemas.by_path[schemas.index[t]]
        assert {"session", "seq", "ts"} <= set(schema["required"]), t
        bad = {"type": t, "session": "s", "seq": 0, "ts": 1}
        assert any("seq" in e for e in schemas.errors(bad, "event")), f"{t}: seq 0 must be rejected"


# --------------------------------------------------------------------------- examples


def _examples() -> list[tuple[str, str, object]]:
    """(where, direction or None, message) for every example message in protocol/*.md."""
    out = []
    for md in MARKDOWN_FILES:
        text = md.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            info, body = m.group(1).strip(), m.group(2)
            line_no = text[: m.start()].count("\n") + 1
            where = f"{_rel(md)}:{line_no}"
            if info == "json":
                out.append((where, None, json.loads(body)))
            elif info == "conversation":
                out.extend(_conversation(where, body))
    return out


def _conversation(where: str, body: str):
    for i, line in enumerate(body.splitlines()):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = CONVERSATION_LINE.match(line)
        assert m, f"{where} +{i + 1}: not `NAME → JSON`, `NAME →! TEXT`, `NAME ← JSON` or `NAME ← close CODE`: {line!r}"
        if m["dir"] == "→!":
            continue  # deliberately invalid input: shown verbatim, not validated
        if CLOSE_LINE.match(m["body"]):
            assert m["dir"] == "←", f"{where} +{i + 1}: closes are received (←)"
            continue
        try:
            msg = json.loads(m["body"])
        except ValueError as e:
            raise AssertionError(f"{where} +{i + 1}: invalid JSON: {e}: {m['body']!r}") from e
        yield (f"{where} +{i + 1}", "command" if m["dir"] == "→" else "event", msg)


EXAMPLES = _examples()


def test_there_are_examples() -> None:
    assert len(EXAMPLES) > 50


def test_every_example_validates(schemas: Schemas) -> None:
    problems = []
    for where, direction, msg in EXAMPLES:
        if isinstance(msg, dict) and "type" not in msg:
            continue  # HTTP bodies and other non-message JSON
        d = direction or schemas.direction(msg.get("type")) or "event"
        for err in schemas.errors(msg, d):
            problems.append(f"{where}: {json.dumps(msg)}\n      {err}")
    assert not problems, "invalid examples:\n  " + "\n  ".join(problems)


def test_every_message_type_has_an_example(schemas: Schemas) -> None:
    shown = {msg.get("type") for where, _, msg in EXAMPLES if isinstance(msg, dict) and where.startswith("PROTOCOL.md")}
    missing = sorted(set(schemas.index) - shown)
    assert not missing, f"PROTOCOL.md has no example of: {missing}"


# --------------------------------------------------------------------------- HTTP and webhook examples

# (request line pattern, part, schema) for the JSON bodies of ```http examples.
HTTP_BODIES = [
    (r"^POST /v1/calls/[^/ ]+/reject ", "request", "http/reject.request.json"),
    (r"^(GET|POST) /v1/calls/", "response", "http/call.json"),
    (r"^GET /v1/sessions/[^/ ]+ ", "response", "http/session.json"),
    (r"^POST /v1/sessions ", "response", "http/session.created.json"),
    (r"^POST /v1/tokens ", "request", "http/token.request.json"),
    (r"^POST /v1/tokens ", "response", "http/token.json"),
]


def _http_examples():
    """(where, schema path, body) for every JSON body in a ```http block of protocol/*.md."""
    for md in MARKDOWN_FILES:
        text = md.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group(1).strip() != "http":
                continue
            where = f"{_rel(md)}:{text[: m.start()].count(chr(10)) + 1}"
            lines = m.group(2).splitlines()
            split = next((i for i, l in enumerate(lines) if l.startswith("HTTP/1.1 ")), len(lines))
            request, response = lines[:split], lines[split:]
            event = next((l.split(":", 1)[1].strip() for l in request if l.startswith("X-Relay-Event:")), None)
            status = int(response[0].split()[1]) if response else 0
            for part, part_lines in (("request", request), ("response", response)):
                body = "\n".join(l for l in part_lines if l.startswith("{"))
                if not body:
                    continue
                if event and part == "request":
                    schema = f"webhook/{event}.json"
                elif part == "response" and status >= 400:
                    schema = "http/error.json"
                else:
                    schema = next((s for pat, pt, s in HTTP_BODIES if pt == part and re.match(pat, request[0])), None)
                assert schema, f"{where}: no schema known for the {part} body of {request[0]!r}"
                yield where, schema, json.loads(body)


HTTP_EXAMPLES = list(_http_examples())


def test_http_and_webhook_examples_validate(schemas: Schemas) -> None:
    assert len(HTTP_EXAMPLES) >= 5
    problems = []
    for where, schema, body in HTTP_EXAMPLES:
        for e in schemas.validator(schema).iter_errors(body):
            problems.append(f"{where} ({schema}): {e.message}")
    assert not problems, "invalid HTTP examples:\n  " + "\n  ".join(problems)


# --------------------------------------------------------------------------- scenarios


def test_there_are_scenarios() -> None:
    assert len(SCENARIOS) >= 20


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_file(path: Path, schemas: Schemas) -> None:
    scenario = json.loads(path.read_text(encoding="utf-8"))
    fmt = json.loads(SCENARIO_FORMAT_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(fmt).validate(scenario)
    assert scenario["name"] == path.stem, "name must equal the file name"
    for name, spec in scenario["clients"].items():
        if "hello" in spec:
            errs = schemas.errors({"type": "hello", **spec["hello"]}, "command")
            assert not errs, f"client {name}: hello invalid: {errs}"
    for step in _flat_steps(scenario["steps"]):
        assert step["client"] in scenario["clients"], f"unknown client in {step}"
        if "send" in step:
            errs = schemas.errors(step["send"], "command")
            assert not errs, f"send is not a valid command (use sendRaw for invalid input): {step}: {errs}"
        for pattern in [step["expect"]] if "expect" in step else step.get("expectUnordered", []):
            t = pattern.get("type")
            assert schemas.direction(t) == "event", f"expect names no server message type: {step}"


def _flat_steps(steps):
    for s in steps:
        if "repeat" in s:
            yield from _flat_steps(s["steps"])
        else:
            yield s


# --------------------------------------------------------------------------- matcher self-test


def test_matcher_semantics() -> None:
    from scenario_runner import match

    caps: dict = {}
    assert match({"a": 1}, {"a": 1, "b": 2}, caps) == []
    assert match({"a": "$absent"}, {"a": 1}, caps)
    assert match({"a": "$any"}, {}, caps)
    assert match({"a": "$capture:x"}, {"a": "v"}, caps) == [] and caps["x"] == "v"
    assert match({"a": "$x"}, {"a": "v"}, caps) == []
    assert match({"a": "$x"}, {"a": "w"}, caps)
    assert match([{"u": 1}], [{"u": 1}, {"u": 2}], caps)
    assert match({"$unordered": [{"u": 2}, {"u": 1}]}, [{"u": 1, "z": 0}, {"u": 2}], caps) == []
    assert match(True, 1, caps)
    assert match("$$lit", "$lit", caps) == []
