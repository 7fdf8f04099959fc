#!/usr/bin/env python3
"""Writes the committed seed corpus of the fuzz targets (Fuzz/corpus/<target>/):
commands and messages from protocol/scenarios, valid and broken frames, HTTP heads
and tokens. Run again only to change the seeds; the fuzzers never write here."""
import base64, glob, hashlib, hmac, json, os, struct

ROOT = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, "corpus")


def put(target, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


def frame(opcode, payload, fin=True, mask=b"\x01\x02\x03\x04", rsv=0):
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    n = len(payload)
    m = 0x80 if mask else 0
    if n < 126:
        head += bytes([m | n])
    elif n < 65536:
        head += bytes([m | 126]) + struct.pack(">H", n)
    else:
        head += bytes([m | 127]) + struct.pack(">Q", n)
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        head += mask
    return head + payload


def b64(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def jwt(claims, alg="HS256"):
    h = b64(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    p = b64(json.dumps(claims).encode())
    s = b64(hmac.new(b"k", f"{h}.{p}".encode(), hashlib.sha256).digest())
    return f"{h}.{p}.{s}".encode()


messages = []
for path in sorted(glob.glob(os.path.join(ROOT, "..", "protocol", "scenarios", "*.json"))):
    for step in json.load(open(path)).get("steps", []):
        if isinstance(step.get("send"), dict):
            messages.append(json.dumps(step["send"], separators=(",", ":")).encode())
for m in messages:
    put("FuzzCommand", m)
    put("FuzzJSON", m)
for j in [b'{"a":[1,-0.5e-3,true,false,null,"\\u00e9\\ud83d\\ude00"]}', b"[[[[[]]]]]", b'"\\"\\\\\\/\\b"', b"1e400", b"-123456789012345678901234567890"]:
    put("FuzzJSON", j)

split = b"\x40\x80"  # FuzzFrames: the first two bytes choose the split points
put("FuzzFrames", split + frame(1, messages[0] if messages else b"{}"))
put("FuzzFrames", split + frame(1, b"hel", fin=False) + frame(9, b"p") + frame(0, b"lo"))
put("FuzzFrames", split + frame(2, bytes(200)) + frame(10, b"") + frame(8, struct.pack(">H", 1000) + b"bye"))
put("FuzzFrames", split + frame(1, "h\u00e9llo \u20ac".encode()) + frame(1, b"\xce\xba\xe1\xbd"))
put("FuzzFrames", split + frame(1, b"x" * 70000))
put("FuzzFrames", split + frame(1, b"unmasked", mask=None) + frame(3, b"", rsv=0x40))

upgrade = (b"GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
           b"Sec-WebSocket-Protocol: relay.v1\r\n\r\n")
put("FuzzHTTPHead", upgrade)
put("FuzzHTTPHead", b"POST /v1/tokens HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\nContent-Length: 12\r\n\r\n{\"sub\":\"a\"}")
put("FuzzHTTPHead", b"GET /metrics HTTP/1.0\r\n\r\n")
put("FuzzHTTPHead", b"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n")

for claims in [{"sub": "a", "exp": 2000000000, "sessions": ["*"], "role": "host", "name": "A"},
               {"sub": "b", "exp": 1.5e308, "nbf": -1e308}, {"sub": "c", "exp": "soon", "sessions": [1]},
               {"exp": 1}]:
    put("FuzzJWT", jwt(claims))
put("FuzzJWT", jwt({"sub": "a", "exp": 1}, alg="none"))
put("FuzzJWT", b"a.b.c")

split = b"\x40\x80"  # FuzzRESP: the first two bytes choose the split points
for r in [b"+OK\r\n-ERR no\r\n:42\r\n:-9223372036854775808\r\n", b"$5\r\nab\r\nc\r\n$0\r\n\r\n$-1\r\n*-1\r\n*0\r\n",
          b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nk\r\n$1\r\nv\r\n",
          b"*1\r\n" * 10 + b":1\r\n", b"*9223372036854775807\r\n", b"$100\r\n" + b"x" * 100 + b"\r\n",
          b"$3\r\nabcd\r\n", b":99999999999999999999\r\n", b"*2\r\n:1\r\n?\r\n"]:
    put("FuzzRESP", split + r)

# FuzzDataFile: a log segment's header (RelayCluster/DataFile.swift) and record frames
# (position, time, LogBatch of node 1: a tick, an open, a text), whole, torn and flipped.
import zlib


def data_header(kind=b"RELAYLOG", rules=1):
    body = kind + struct.pack("<HBBI", 1, 3, 1, rules) + b"\x01" * 32
    return body + struct.pack("<I", zlib.crc32(body))


def data_frame(payload):
    return struct.pack("<II", len(payload), zlib.crc32(payload)) + payload


def batch(*inputs):
    return b"\x03" + struct.pack("<I", 1) + b"".join(struct.pack("<I", len(i)) + i for i in inputs)


conn = struct.pack("<Q", 1 << 40 | 1)
records = [data_frame(struct.pack("<Qq", p, 1000 + p) + b) for p, b in
           [(2, batch(b"\x04")), (3, batch(b"\x05" + conn)),
            (4, batch(b"\x06" + conn + struct.pack("<I", 16) + b'{"type":"hello"}'))]]
segment = data_header() + b"".join(records)
put("FuzzDataFile", segment)
put("FuzzDataFile", segment[:-7])
put("FuzzDataFile", segment[:60] + bytes([segment[60] ^ 0x10]) + segment[61:])
put("FuzzDataFile", data_header(b"RELAYSNP", rules=7) + data_frame(b"\x01" + b"\x00" * 40))
