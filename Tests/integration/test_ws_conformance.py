"""RFC 6455 conformance of the relay's frame layer, over a real socket.

Modelled on the Autobahn|Testsuite case categories (framing, ping/pong,
reserved bits, opcodes, fragmentation, UTF-8, close handling, limits), written
from the RFC and PROTOCOL.md §1 against `relay serve --echo` (`GET /v1/echo`).
Every test speaks raw bytes through wsraw.RawClient; each wait is bounded.
"""
from __future__ import annotations

import os
import random
import socket
import time

import pytest

from wsraw import (
    OP_BINARY,
    OP_CLOSE,
    OP_CONT,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    ConnectionClosed,
    RawClient,
    ReadTimeout,
    build_frame,
    close_payload,
    connect,
)

FAST_S = 2.0  # how long a "detected at once" failure may take
MAX_DEFAULT = 65536


@pytest.fixture
def srv(echo_relay):
    """The echo relay; after the test it must still be running and serving."""
    yield echo_relay
    assert echo_relay.proc.poll() is None, f"relay exited with {echo_relay.proc.returncode} during the test"
    assert_serving(echo_relay.port)


def assert_serving(port: int) -> None:
    with connect(port) as c:
        c.send_text("still alive?")
        assert c.recv_message() == (OP_TEXT, b"still alive?")
        c.close_handshake(1000)


def text_payload(n: int, seed: int = 0) -> bytes:
    rnd = random.Random(seed + n)
    alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:-_"
    return bytes(rnd.choice(alphabet) for _ in range(n))


def echo_roundtrip(c: RawClient, opcode: int, payload: bytes, **kw) -> None:
    c.send_frame(opcode, payload, **kw)
    got = c.recv_message()
    assert got[0] == opcode, f"echo opcode {got[0]:#x}, expected {opcode:#x}"
    assert got[1] == payload, f"echo payload differs (len {len(got[1])} vs {len(payload)})"


# ---------------------------------------------------------------- 1. framing
@pytest.mark.parametrize("length", [0, 1, 125, 126, 127, 65535, 65536])
@pytest.mark.parametrize("opcode", [OP_TEXT, OP_BINARY], ids=["text", "binary"])
def test_framing_echo_lengths(srv, opcode, length):
    payload = text_payload(length) if opcode == OP_TEXT else os.urandom(length)
    with connect(srv.port) as c:
        echo_roundtrip(c, opcode, payload)
        c.close_handshake(1000)


@pytest.mark.parametrize(
    "length,length_bytes",
    [(0, 2), (5, 2), (125, 2), (5, 8), (125, 8), (126, 8), (300, 8), (65535, 8)],
    ids=lambda v: str(v),
)
def test_framing_non_minimal_length_encoding_accepted(srv, length, length_bytes):
    payload = os.urandom(length)
    with connect(srv.port) as c:
        echo_roundtrip(c, OP_BINARY, payload, length_bytes=length_bytes)
        c.close_handshake(1000)


@pytest.mark.parametrize("length", [0, 20, 130])
def test_framing_frame_sent_in_one_byte_chunks(srv, length):
    payload = text_payload(length, seed=7)
    with connect(srv.port) as c:
        echo_roundtrip(c, OP_TEXT, payload, chunks=1, pause=0.001)
        c.close_handshake(1000)


def test_framing_large_frame_header_split_across_chunks(srv):
    payload = os.urandom(65536)
    frame = build_frame(OP_BINARY, payload, length_bytes=8)
    with connect(srv.port) as c:
        # header 2 + 8 + 4 mask bytes, cut at every header boundary, then 4 KiB pieces
        c.send(frame, chunks=[1, 1, 3, 5, 2, 2] + [4096] * 16, pause=0.002)
        assert c.recv_message() == (OP_BINARY, payload)
        c.close_handshake(1000)


def test_framing_several_frames_in_one_tcp_write(srv):
    msgs = [(OP_TEXT, b"one"), (OP_BINARY, b"\x00\x01two"), (OP_TEXT, b""), (OP_TEXT, b"four")]
    with connect(srv.port) as c:
        c.send(b"".join(build_frame(op, p) for op, p in msgs))
        for m in msgs:
            assert c.recv_message() == m
        c.close_handshake(1000)


def test_framing_many_messages_in_sequence(srv):
    with connect(srv.port) as c:
        for i in range(200):
            echo_roundtrip(c, OP_TEXT if i % 2 else OP_BINARY, b"m%d" % i)
        c.close_handshake(1000)


def test_framing_mask_key_zero_accepted(srv):
    with connect(srv.port) as c:
        echo_roundtrip(c, OP_TEXT, b"zero mask", mask_key=b"\x00\x00\x00\x00")
        c.close_handshake(1000)


# -------------------------------------------------------------- 2. ping/pong
@pytest.mark.parametrize("payload", [b"", b"hello", bytes(range(125))], ids=["empty", "small", "125"])
def test_ping_answered_with_pong_same_payload(srv, payload):
    with connect(srv.port) as c:
        c.send_frame(OP_PING, payload)
        f = c.recv_frame()
        assert (f.opcode, f.fin, f.payload) == (OP_PONG, True, payload)
        c.close_handshake(1000)


def test_ping_in_one_byte_chunks(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_PING, b"chunked ping", chunks=1, pause=0.001)
        f = c.recv_frame()
        assert (f.opcode, f.payload) == (OP_PONG, b"chunked ping")
        c.close_handshake(1000)


def test_ping_126_bytes_is_protocol_error(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_PING, b"x" * 126)
        c.expect_close(1002)


def test_ping_long_length_encoding_is_protocol_error(srv):
    # A control frame cannot use the 16-bit length form at all (length ≤ 125).
    with connect(srv.port) as c:
        c.send_frame(OP_PING, b"x" * 300, length_bytes=2)
        c.expect_close(1002)


def test_fragmented_ping_is_protocol_error(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_PING, b"frag", fin=False)
        c.expect_close(1002)


def test_unsolicited_pong_ignored(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_PONG, b"unsolicited")
        c.send_frame(OP_PONG, b"")
        c.send_text("after pongs")
        f = c.recv_frame()
        assert (f.opcode, f.payload) == (OP_TEXT, b"after pongs")
        c.close_handshake(1000)


def test_ten_pings_answered_in_order(srv):
    payloads = [b"ping-%d" % i for i in range(10)]
    with connect(srv.port) as c:
        c.send(b"".join(build_frame(OP_PING, p) for p in payloads))
        got = [c.recv_frame() for _ in payloads]
        assert [(f.opcode, f.payload) for f in got] == [(OP_PONG, p) for p in payloads]
        c.close_handshake(1000)


def test_pings_interleaved_with_messages_answered(srv):
    # Pongs (frame layer) and echoes (application) may interleave in any way,
    # but each kind keeps its own order.
    with connect(srv.port) as c:
        c.send(build_frame(OP_TEXT, b"a") + build_frame(OP_PING, b"p1") + build_frame(OP_TEXT, b"b")
               + build_frame(OP_PING, b"p2"))
        got = [(f.opcode, f.payload) for f in (c.recv_frame() for _ in range(4))]
        assert [g for g in got if g[0] == OP_TEXT] == [(OP_TEXT, b"a"), (OP_TEXT, b"b")], got
        assert [g for g in got if g[0] == OP_PONG] == [(OP_PONG, b"p1"), (OP_PONG, b"p2")], got
        c.close_handshake(1000)


# ---------------------------------------------------------- 3. reserved bits
@pytest.mark.parametrize("rsv", [4, 2, 1, 6, 5, 3, 7], ids=lambda r: f"rsv{r:03b}")
def test_reserved_bits_on_text_are_protocol_error(srv, rsv):
    with connect(srv.port) as c:
        c.send_frame(OP_TEXT, b"reserved", rsv=rsv)
        c.expect_close(1002)


@pytest.mark.parametrize("opcode", [OP_BINARY, OP_PING, OP_PONG, OP_CLOSE], ids=["binary", "ping", "pong", "close"])
def test_reserved_bits_on_other_frames_are_protocol_error(srv, opcode):
    payload = close_payload(1000) if opcode == OP_CLOSE else b"x"
    with connect(srv.port) as c:
        c.send_frame(opcode, payload, rsv=4)
        c.expect_close(1002)


def expect_echo_then_close(c: RawClient, echo: bytes, code: int) -> None:
    """The echo of `echo`, then a close frame with `code`, and nothing between
    (never a pong). RFC 6455 §5.4, §7.1.7: frames are processed in order, so a
    complete message before the bad frame is delivered even when both arrive
    in one TCP segment (Autobahn counts closing without it as non-strict)."""
    f = c.recv_frame()
    assert (f.opcode, f.fin, f.payload) == (OP_TEXT, True, echo), f"expected the echo of {echo!r} first, got {f!r}"
    f = c.recv_frame()
    assert f.opcode == OP_CLOSE, f"expected close {code}, got {f!r}"
    assert f.close_code == code, f"expected close code {code}, got {f.close_code} ({f.close_reason!r})"
    c.send_close(code)
    c.wait_tcp_close()


def good_then_bad_in_one_write(port: int, bad: bytes) -> None:
    """Autobahn's shape for 3.2, 4.1.3, 4.2.3 …, in one write: a good message,
    the bad frame, then a ping that must never be answered."""
    with connect(port) as c:
        c.send(build_frame(OP_TEXT, b"good") + bad + build_frame(OP_PING, b"p"))
        expect_echo_then_close(c, b"good", 1002)


@pytest.mark.parametrize("rsv", [2, 3, 4], ids=lambda r: f"rsv{r:03b}")
def test_reserved_bits_after_valid_message(srv, rsv):
    good_then_bad_in_one_write(srv.port, build_frame(OP_TEXT, b"bad", rsv=rsv))


def test_reserved_bits_on_continuation_are_protocol_error(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_TEXT, b"start", fin=False)
        c.send_frame(OP_CONT, b"end", rsv=1)
        c.expect_close(1002)


# -------------------------------------------------------------- 4. opcodes
@pytest.mark.parametrize("opcode", [3, 4, 5, 6, 7, 11, 12, 13, 14, 15])
@pytest.mark.parametrize("payload", [b"", b"payload"], ids=["empty", "payload"])
def test_reserved_opcode_is_protocol_error(srv, opcode, payload):
    with connect(srv.port) as c:
        c.send_frame(opcode, payload)
        c.expect_close(1002)


@pytest.mark.parametrize("opcode", [3, 4, 11, 12])
@pytest.mark.parametrize("payload", [b"", b"bad"], ids=["empty", "payload"])
def test_reserved_opcode_after_valid_message(srv, opcode, payload):
    # Autobahn 4.1.3/4.1.4 (data) and 4.2.3/4.2.4 (control).
    good_then_bad_in_one_write(srv.port, build_frame(opcode, payload))


# -------------------------------------------------------- 5. fragmentation
def send_fragments(c: RawClient, opcode: int, parts: list[bytes], **kw) -> None:
    for i, p in enumerate(parts):
        c.send_frame(opcode if i == 0 else OP_CONT, p, fin=(i == len(parts) - 1), **kw)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 100])
@pytest.mark.parametrize("opcode", [OP_TEXT, OP_BINARY], ids=["text", "binary"])
def test_fragmented_message_echoed_whole(srv, opcode, n):
    payload = text_payload(1000, seed=n)
    size = -(-len(payload) // n)
    parts = [payload[i:i + size] for i in range(0, len(payload), size)]
    with connect(srv.port) as c:
        send_fragments(c, opcode, parts)
        assert c.recv_message() == (opcode, payload)
        c.close_handshake(1000)


def test_five_thousand_one_byte_fragments(srv):
    payload = text_payload(5000, seed=3)
    with connect(srv.port) as c:
        c.send(b"".join(build_frame(OP_TEXT if i == 0 else OP_CONT, payload[i:i + 1], fin=(i == 4999))
                        for i in range(5000)))
        assert c.recv_message() == (OP_TEXT, payload)
        c.close_handshake(1000)


def test_fragmented_message_up_to_max_accepted(srv):
    payload = os.urandom(MAX_DEFAULT)
    with connect(srv.port) as c:
        send_fragments(c, OP_BINARY, [payload[:30000], payload[30000:60000], payload[60000:]])
        assert c.recv_message() == (OP_BINARY, payload)
        c.close_handshake(1000)


def test_ping_between_fragments_answered_immediately(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_TEXT, b"frag1-", fin=False)
        c.send_frame(OP_PING, b"mid")
        f = c.recv_frame(FAST_S)  # before the message is complete
        assert (f.opcode, f.payload) == (OP_PONG, b"mid")
        c.send_frame(OP_CONT, b"frag2-", fin=False)
        c.send_frame(OP_PING, b"mid2")
        f = c.recv_frame(FAST_S)
        assert (f.opcode, f.payload) == (OP_PONG, b"mid2")
        c.send_frame(OP_CONT, b"frag3", fin=True)
        assert c.recv_message() == (OP_TEXT, b"frag1-frag2-frag3")
        c.close_handshake(1000)


def test_pong_between_fragments_ignored(srv):
    with connect(srv.port) as c:
        c.send(build_frame(OP_BINARY, b"a", fin=False) + build_frame(OP_PONG, b"x")
               + build_frame(OP_CONT, b"b", fin=True))
        assert c.recv_message() == (OP_BINARY, b"ab")
        c.close_handshake(1000)


def test_fragments_with_ping_in_one_byte_chunks(srv):
    data = (build_frame(OP_TEXT, b"Hello, ", fin=False) + build_frame(OP_PING, b"ping")
            + build_frame(OP_CONT, b"World!", fin=True))
    with connect(srv.port) as c:
        c.send(data, chunks=1, pause=0.001)
        f = c.recv_frame()
        assert (f.opcode, f.payload) == (OP_PONG, b"ping")
        assert c.recv_message() == (OP_TEXT, b"Hello, World!")
        c.close_handshake(1000)


@pytest.mark.parametrize("fin", [True, False], ids=["fin", "nofin"])
def test_continuation_without_start_is_protocol_error(srv, fin):
    with connect(srv.port) as c:
        c.send_frame(OP_CONT, b"orphan", fin=fin)
        c.expect_close(1002)


def test_continuation_after_complete_message_is_protocol_error(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_TEXT, b"complete")
        assert c.recv_message() == (OP_TEXT, b"complete")
        c.send_frame(OP_CONT, b"late", fin=True)
        c.expect_close(1002)


@pytest.mark.parametrize("fin", [True, False], ids=["fin", "nofin"])
def test_orphan_continuation_after_valid_message_in_one_write(srv, fin):
    good_then_bad_in_one_write(srv.port, build_frame(OP_CONT, b"orphan", fin=fin))


def test_fragmented_message_then_orphan_continuation_in_one_write(srv):
    # Autobahn 5.15: a message in two fragments, a continuation with nothing to
    # continue, then a text message, all in one chop: the first is delivered.
    with connect(srv.port) as c:
        c.send(build_frame(OP_TEXT, b"fragment1", fin=False) + build_frame(OP_CONT, b"fragment2", fin=True)
               + build_frame(OP_CONT, b"fragment3", fin=False) + build_frame(OP_TEXT, b"fragment4"))
        expect_echo_then_close(c, b"fragment1fragment2", 1002)


def test_command_answered_before_bad_frame_closes_in_one_write(relay):
    # /v1/ws keeps the order too: the reply to a command in the same write as a
    # bad frame is sent before the close 1002.
    hello = b'{"type":"hello","id":"h","dev":{"uid":"alice","name":"Alice"}}'
    with connect(relay.port, path="/v1/ws", protocols=["relay.v1"]) as c:
        c.send(build_frame(OP_TEXT, hello) + build_frame(OP_TEXT, b"bad", rsv=1))
        f = c.recv_frame()
        assert f.opcode == OP_TEXT and b'"type":"welcome"' in f.payload, f
        c.expect_close(1002)


@pytest.mark.parametrize("second", [OP_TEXT, OP_BINARY], ids=["text", "binary"])
@pytest.mark.parametrize("second_fin", [True, False], ids=["fin", "nofin"])
def test_new_data_frame_during_fragmented_message_is_protocol_error(srv, second, second_fin):
    with connect(srv.port) as c:
        c.send_frame(OP_TEXT, b"started", fin=False)
        c.send_frame(second, b"intruder", fin=second_fin)
        c.expect_close(1002)


def test_empty_fragments(srv):
    with connect(srv.port) as c:
        send_fragments(c, OP_TEXT, [b"", b"", b"abc", b"", b"def", b""])
        assert c.recv_message() == (OP_TEXT, b"abcdef")
        send_fragments(c, OP_TEXT, [b"", b"", b""])
        assert c.recv_message() == (OP_TEXT, b"")
        send_fragments(c, OP_BINARY, [b"", b"\x00"])
        assert c.recv_message() == (OP_BINARY, b"\x00")
        c.close_handshake(1000)


def test_close_between_fragments_is_answered(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_TEXT, b"never finished", fin=False)
        c.send_close(1000)
        f = c.expect_close(1000, reply=False)
        assert f.opcode == OP_CLOSE
        c.wait_tcp_close()


# ---------------------------------------------------------------- 6. UTF-8
VALID_TEXTS = {
    "2byte": "\u00fc\u00e9\u00df",  # ü é ß
    "3byte": "\u20ac\u4e2d\ufffd",  # € 中 U+FFFD
    "4byte": "\U0001d11e\U0001f600\U0010ffff",  # 𝄞 😀 U+10FFFF
    "kosme": "\u03ba\u1f79\u03c3\u03bc\u03b5",  # κόσμε
    "boundaries": "\u007f\u0080\u07ff\u0800\ud7ff\ue000\uffff\U00010000",
    "nul": "a\x00b",
}


@pytest.mark.parametrize("name", list(VALID_TEXTS))
def test_utf8_valid_text_echoed(srv, name):
    data = VALID_TEXTS[name].encode("utf-8")
    with connect(srv.port) as c:
        echo_roundtrip(c, OP_TEXT, data)
        c.close_handshake(1000)


def test_utf8_split_across_fragments_at_every_byte(srv):
    data = "a\u00fc\u20ac\U0001d11ez".encode("utf-8")  # 1+2+3+4+1 bytes
    with connect(srv.port) as c:
        for i in range(1, len(data)):
            send_fragments(c, OP_TEXT, [data[:i], data[i:]])
            assert c.recv_message() == (OP_TEXT, data), f"split at {i}"
        send_fragments(c, OP_TEXT, [data[i:i + 1] for i in range(len(data))])  # one byte per fragment
        assert c.recv_message() == (OP_TEXT, data)
        c.close_handshake(1000)


def test_utf8_split_across_tcp_chunks(srv):
    data = ("\U0001f600\u20ac\u00fc" * 20).encode("utf-8")
    with connect(srv.port) as c:
        echo_roundtrip(c, OP_TEXT, data, chunks=1, pause=0.0005)
        frame = build_frame(OP_TEXT, data)
        for cut in (7, 8, 9, 10):  # header is 2+2+4 bytes; cut inside code points
            c.send(frame, chunks=[cut, 3, 5, 2], pause=0.002)
            assert c.recv_message() == (OP_TEXT, data)
        c.close_handshake(1000)


def test_utf8_fragment_ending_mid_code_point_does_not_fail(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_TEXT, b"euro: \xe2\x82", fin=False)
        c.send_frame(OP_PING, b"alive?")
        f = c.recv_frame(FAST_S)
        assert (f.opcode, f.payload) == (OP_PONG, b"alive?"), "split code point treated as invalid too early"
        c.send_frame(OP_CONT, b"\xac", fin=True)
        assert c.recv_message() == (OP_TEXT, "euro: \u20ac".encode())
        c.close_handshake(1000)


INVALID_UTF8 = {
    "overlong_2_C0": b"\xc0\xaf",
    "overlong_2_C1": b"\xc1\xbf",
    "overlong_3": b"\xe0\x80\xaf",
    "overlong_3_max": b"\xe0\x9f\xbf",
    "overlong_4": b"\xf0\x80\x80\xaf",
    "overlong_4_max": b"\xf0\x8f\xbf\xbf",
    "surrogate_high": b"\xed\xa0\x80",
    "surrogate_low": b"\xed\xbf\xbf",
    "surrogate_pair": b"\xed\xa0\xbd\xed\xb8\x80",
    "above_max_F4_90": b"\xf4\x90\x80\x80",
    "above_max_F5": b"\xf5\x80\x80\x80",
    "above_max_F7": b"\xf7\xbf\xbf\xbf",
    "five_byte": b"\xf8\x88\x80\x80\x80",
    "six_byte": b"\xfc\x84\x80\x80\x80\x80",
    "stray_continuation_80": b"\x80",
    "stray_continuation_BF": b"\xbf",
    "stray_after_ascii": b"A\x80B",
    "byte_FE": b"\xfe",
    "byte_FF": b"\xff",
    "missing_continuation_2": b"\xc3(",
    "missing_continuation_3": b"\xe2(\xa1",
    "missing_continuation_4": b"\xf0\x9f(\x80",
    "truncated_end_2": b"\xc3",
    "truncated_end_3": b"\xe2\x82",
    "truncated_end_4": b"\xf0\x9f\x98",
}


@pytest.mark.parametrize("name", list(INVALID_UTF8))
def test_utf8_invalid_single_frame_is_1007(srv, name):
    bad = INVALID_UTF8[name]
    payload = b"hello " + bad if name.startswith("truncated_end") else b"hello " + bad + b" world"
    with connect(srv.port) as c:
        c.send_frame(OP_TEXT, payload)
        c.expect_close(1007)


@pytest.mark.parametrize("name", ["overlong_3", "surrogate_high", "above_max_F4_90", "byte_FF", "truncated_end_3"])
def test_utf8_invalid_in_fragmented_message_is_1007(srv, name):
    bad = INVALID_UTF8[name]
    with connect(srv.port) as c:
        # The bad sequence straddles the two fragments where it has ≥ 2 bytes.
        send_fragments(c, OP_TEXT, [b"valid start " + bad[:1], bad[1:] + (b"" if name.startswith("truncated") else b" end")])
        c.expect_close(1007)


def test_utf8_valid_message_then_invalid_message(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_TEXT, "ok \u20ac".encode())
        assert c.recv_message() == (OP_TEXT, "ok \u20ac".encode())
        c.send_frame(OP_TEXT, b"bad \xed\xa0\x80")
        c.expect_close(1007)


def test_utf8_invalid_in_binary_is_fine(srv):
    with connect(srv.port) as c:
        echo_roundtrip(c, OP_BINARY, b"\xff\xfe\xc0\xaf\xed\xa0\x80")
        c.close_handshake(1000)


# Fail fast: the offending byte arrives, the rest of the frame never does.
FAIL_FAST_PREFIXES = {
    "byte_FF": b"hello \xff",
    "stray_continuation": b"hello \x80",
    "overlong_C0": b"hello \xc0",
    "overlong_E0_80": b"hello \xe0\x80",
    "surrogate_ED_A0": b"hello \xed\xa0",
    "above_max_F4_90": b"hello \xf4\x90",
    "byte_F5": b"hello \xf5",
    "missing_continuation": b"hello \xe2\x28",
}


@pytest.mark.parametrize("name", list(FAIL_FAST_PREFIXES))
def test_utf8_fail_fast_within_incomplete_frame(srv, name):
    prefix = FAIL_FAST_PREFIXES[name]
    frame = build_frame(OP_TEXT, prefix + b"x" * (1000 - len(prefix)))
    head = 2 + 2 + 4
    with connect(srv.port) as c:
        c.send(frame[: head + len(prefix)])  # the rest is never sent
        t0 = time.monotonic()
        c.expect_close(1007, timeout=FAST_S)
        assert time.monotonic() - t0 < FAST_S


def test_utf8_fail_fast_in_unfinished_fragmented_message(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_TEXT, b"fragment one", fin=False)
        c.send_frame(OP_CONT, b"fragment two \xed\xa0\x80", fin=False)  # message never finished
        c.expect_close(1007, timeout=FAST_S)


def test_utf8_fail_fast_in_incomplete_continuation_frame(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_TEXT, b"fragment one", fin=False)
        frame = build_frame(OP_CONT, b"\xf8" + b"y" * 499, fin=True)
        c.send(frame[: 2 + 2 + 4 + 1])
        c.expect_close(1007, timeout=FAST_S)


def test_utf8_fail_fast_single_frame_split_code_point_then_bad_byte(srv):
    # First chunk ends inside a valid 3-byte sequence; the next byte breaks it.
    frame = build_frame(OP_TEXT, b"\xe2\x82" + b"(" + b"z" * 200)
    with connect(srv.port) as c:
        c.send(frame[: 8 + 2])
        c.send(frame[8 + 2: 8 + 3])
        c.expect_close(1007, timeout=FAST_S)


# ---------------------------------------------------------------- 7. close
def test_close_empty_answered(srv):
    with connect(srv.port) as c:
        c.send_close(None, ignore_errors=False)
        f = c.recv_frame()
        assert f.opcode == OP_CLOSE, f
        assert f.close_code in (None, 1000), f"empty close answered with code {f.close_code}"
        c.wait_tcp_close()


@pytest.mark.parametrize("code", [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999])
def test_close_code_echoed(srv, code):
    with connect(srv.port) as c:
        c.close_handshake(code, "bye")


def test_close_with_max_length_reason(srv):
    with connect(srv.port) as c:
        c.close_handshake(1000, "r" * 123)


def test_close_with_utf8_reason(srv):
    with connect(srv.port) as c:
        c.close_handshake(1000, "\u00fc\u20ac\U0001d11e")


@pytest.mark.parametrize("code", [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535])
def test_close_invalid_code_is_protocol_error(srv, code):
    with connect(srv.port) as c:
        c.send_close(code, ignore_errors=False)
        c.expect_close(1002)


def test_close_one_byte_payload_is_protocol_error(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_CLOSE, b"\x03")
        c.expect_close(1002)


def test_close_payload_over_125_is_protocol_error(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_CLOSE, close_payload(1000, b"r" * 124))
        c.expect_close(1002)


def test_fragmented_close_is_protocol_error(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_CLOSE, close_payload(1000), fin=False)
        c.expect_close(1002)


@pytest.mark.parametrize("reason", [b"\xff", b"ok \xed\xa0\x80", b"\xc0\xaf", b"trunc \xe2\x82"], ids=["FF", "surrogate", "overlong", "truncated"])
def test_close_invalid_utf8_reason_is_1007(srv, reason):
    with connect(srv.port) as c:
        c.send_close(1000, reason, ignore_errors=False)
        c.expect_close(1007)


def test_data_after_close_ignored(srv):
    with connect(srv.port) as c:
        c.send(build_frame(OP_CLOSE, close_payload(1000)) + build_frame(OP_TEXT, b"after close")
               + build_frame(OP_PING, b"after close"))
        f = c.recv_frame()
        assert (f.opcode, f.close_code) == (OP_CLOSE, 1000), f
        # Nothing else may follow the close frame: no echo, no pong.
        c.wait_tcp_close(discard=False)


def test_server_closes_tcp_after_close_handshake(srv):
    with connect(srv.port) as c:
        c.send_text("x")
        assert c.recv_message() == (OP_TEXT, b"x")
        c.send_close(1000, ignore_errors=False)
        assert c.recv_frame().close_code == 1000
        how = c.wait_tcp_close(timeout=FAST_S, discard=False)
        assert how in ("eof", "reset")


def test_close_in_one_byte_chunks(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_CLOSE, close_payload(3000, "slow"), chunks=1, pause=0.001)
        c.expect_close(3000, reply=False)
        c.wait_tcp_close()


# --------------------------------------------------------------- 8. limits
def test_message_over_max_is_1009(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_BINARY, os.urandom(MAX_DEFAULT + 1), ignore_errors=True)
        c.expect_close(1009)


def test_text_message_over_max_is_1009(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_TEXT, b"t" * (MAX_DEFAULT + 1), ignore_errors=True)
        c.expect_close(1009)


def test_fragmented_message_over_max_is_1009(srv):
    with connect(srv.port) as c:
        c.send_frame(OP_BINARY, b"a" * 40000, fin=False)
        c.send_frame(OP_CONT, b"b" * 40000, fin=True, ignore_errors=True)
        c.expect_close(1009)


def test_declared_length_over_max_closes_without_waiting_for_payload(srv):
    frame = build_frame(OP_BINARY, b"", declared_length=1 << 20)
    with connect(srv.port) as c:
        c.send(frame + b"\x00" * 100)  # header announces 1 MiB; only 100 bytes follow
        c.expect_close(1009, timeout=FAST_S)


def test_message_at_max_after_messages_accepted(srv):
    # The limit is per message, not cumulative.
    with connect(srv.port) as c:
        for _ in range(3):
            echo_roundtrip(c, OP_BINARY, os.urandom(MAX_DEFAULT))
        c.close_handshake(1000)


@pytest.mark.parametrize("opcode", [OP_TEXT, OP_BINARY, OP_PING, OP_CLOSE], ids=["text", "binary", "ping", "close"])
def test_unmasked_client_frame_is_protocol_error(srv, opcode):
    payload = close_payload(1000) if opcode == OP_CLOSE else b"unmasked"
    with connect(srv.port) as c:
        c.send_frame(opcode, payload, mask=False)
        c.expect_close(1002)


def test_64bit_length_with_msb_set_is_protocol_error(srv):
    with connect(srv.port) as c:
        c.send(build_frame(OP_BINARY, b"", declared_length=(1 << 63) | 5, length_bytes=8) + b"12345")
        c.expect_close(1002, timeout=FAST_S)


def test_frames_pipelined_behind_upgrade_request(srv):
    # Frames pipelined right behind the upgrade request are processed as frames.
    c = RawClient(srv.port)
    with c:
        key = "dGhlIHNhbXBsZSBub25jZQ=="
        req = (f"GET /v1/echo HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        c.send(req.encode() + build_frame(OP_TEXT, b"pipelined"))
        resp = c.read_http_response()
        assert resp.status == 101
        assert resp.header("Sec-WebSocket-Accept") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        assert c.recv_message() == (OP_TEXT, b"pipelined")
        c.close_handshake(1000)


# ------------------------------------------------- handshake-level framing
def test_handshake_in_one_byte_chunks(srv):
    with RawClient(srv.port) as c:
        key = "AAAAAAAAAAAAAAAAAAAAAA=="
        req = (f"GET /v1/echo HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        c.send(req.encode(), chunks=1, pause=0.0005)
        resp = c.read_http_response()
        assert resp.status == 101
        echo_roundtrip(c, OP_TEXT, b"after slow handshake")
        c.close_handshake(1000)


def test_echo_ignores_subprotocol_offer(srv):
    with connect(srv.port, protocols=["chat", "superchat"]) as c:
        assert c.handshake_response.header("Sec-WebSocket-Protocol") is None, \
            "server selected a subprotocol the echo endpoint does not speak"
        echo_roundtrip(c, OP_TEXT, b"no subprotocol")
        c.close_handshake(1000)


def test_permessage_deflate_offer_not_negotiated_and_rsv1_rejected(srv):
    with connect(srv.port, headers=[("Sec-WebSocket-Extensions",
                                     "permessage-deflate; client_max_window_bits, x-webkit-deflate-frame")]) as c:
        # connect() already asserted there is no Sec-WebSocket-Extensions in the 101.
        echo_roundtrip(c, OP_TEXT, b"uncompressed")
        c.send_frame(OP_TEXT, b"\xf2H\xcd\xc9\xc9\x07\x00", rsv=4)  # "Hello" deflated, as if negotiated
        c.expect_close(1002)


# ------------------------------------------- failing closes the TCP connection
def test_server_closes_tcp_after_failing_even_if_client_never_answers(srv):
    with connect(srv.port) as c:
        c.auto_pong = False
        c.send_frame(OP_TEXT, b"x", rsv=1)
        c.expect_close(1002, reply=False)
        assert c.is_closed_within(10.0), "server kept the TCP connection open after failing it"


def test_server_closes_tcp_after_close_even_if_client_sends_nothing_more(srv):
    # The client sends close and then goes quiet: the server's close reply and
    # TCP close must not depend on the client doing anything more.
    with connect(srv.port) as c:
        c.send_close(1000, ignore_errors=False)
        assert c.is_closed_within(10.0)


# ------------------------------------------------------------ pipelining
def test_thousand_pipelined_pings_all_answered(srv):
    payloads = [b"%04d" % i for i in range(1000)]
    with connect(srv.port) as c:
        c.send(b"".join(build_frame(OP_PING, p) for p in payloads))
        got = [c.recv_frame() for _ in payloads]
        assert [(f.opcode, f.payload) for f in got] == [(OP_PONG, p) for p in payloads]
        c.close_handshake(1000)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_random_stream_random_splits(srv, seed):
    """A seeded mix of messages (single-frame and fragmented, text with
    multi-byte characters and binary) and pings, cut at random points."""
    rnd = random.Random(seed)
    stream = bytearray()
    expected: list[tuple[int, bytes]] = []
    pongs: list[bytes] = []
    pieces = ["a", "\u00fc", "\u20ac", "\U0001f600", " "]
    for i in range(60):
        kind = rnd.choice(["text", "binary", "ping"])
        if kind == "ping":
            p = rnd.randbytes(rnd.randint(0, 125))
            stream += build_frame(OP_PING, p)
            pongs.append(p)
            continue
        if kind == "text":
            data = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 400))).encode()
            op = OP_TEXT
        else:
            data = rnd.randbytes(rnd.choice([0, 1, 125, 126, 1000, 70000 // 2]))
            op = OP_BINARY
        cuts = sorted(rnd.sample(range(1, len(data)), min(len(data) - 1, rnd.randint(0, 4)))) if len(data) > 1 else []
        parts = [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]
        for j, part in enumerate(parts):
            stream += build_frame(op if j == 0 else OP_CONT, part, fin=(j == len(parts) - 1))
            if rnd.random() < 0.2 and j < len(parts) - 1:
                p = b"mid%d" % i
                stream += build_frame(OP_PING, p)
                pongs.append(p)
        expected.append((op, data))
    splits = sorted(rnd.sample(range(1, len(stream)), 200))
    sizes = [b - a for a, b in zip([0] + splits, splits + [len(stream)])]
    with connect(srv.port) as c:
        c.send(bytes(stream), chunks=sizes)
        got_msgs: list[tuple[int, bytes]] = []
        got_pongs: list[bytes] = []
        current: tuple[int, bytearray] | None = None  # the server may fragment its echo
        while len(got_msgs) < len(expected) or len(got_pongs) < len(pongs):
            f = c.recv_frame()
            if f.opcode == OP_PONG:
                got_pongs.append(f.payload)
                continue
            if current is None:
                assert f.opcode in (OP_TEXT, OP_BINARY), f"seed {seed}: unexpected {f!r}"
                current = (f.opcode, bytearray())
            else:
                assert f.opcode == OP_CONT, f"seed {seed}: unexpected {f!r}"
            current[1].extend(f.payload)
            if f.fin:
                got_msgs.append((current[0], bytes(current[1])))
                current = None
        assert got_pongs == pongs, f"seed {seed}"
        assert len(got_msgs) == len(expected)
        for k, (g, e) in enumerate(zip(got_msgs, expected)):
            assert g == e, f"seed {seed}: message {k} differs"
        c.close_handshake(1000)


# ------------------------------------------------- TCP end without a close frame
@pytest.mark.parametrize("where", ["idle", "mid_frame", "mid_fragmented_message"])
def test_tcp_eof_without_close_frame_is_closed(srv, where):
    """The client half-closes TCP without a close frame (RFC 6455 §7.1.5: 1006
    on the server's side): the server must close its end too, not hang on."""
    with connect(srv.port) as c:
        if where == "mid_frame":
            c.send(build_frame(OP_TEXT, b"never completed payload")[:10])
        elif where == "mid_fragmented_message":
            c.send_frame(OP_TEXT, b"first part", fin=False)
        c.sock.shutdown(socket.SHUT_WR)
        # A close frame may come first (not required after an abnormal end); then TCP closes.
        deadline = time.monotonic() + 5.0
        while True:
            try:
                f = c.recv_frame(max(0.1, deadline - time.monotonic()))
            except ConnectionClosed:
                break
            except ReadTimeout:
                raise AssertionError("server did not close its end within 5 s of the client's EOF") from None
            assert f.opcode == OP_CLOSE, f"unexpected frame after client EOF: {f!r}"


# ------------------------------------------------------------------ fuzzing
def valid_close_code(code: int | None) -> bool:
    return code is None or code in (1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011) or 3000 <= code <= 4999


def random_frame(rnd: random.Random) -> bytes:
    """Mostly plausible frames with one thing wrong now and then."""
    opcode = rnd.choice([OP_TEXT, OP_BINARY, OP_CONT, OP_PING, OP_PONG, OP_CLOSE] * 3 + list(range(16)))
    n = rnd.choice([0, 1, 2, 5, 125, 126, 127, 1000, 70000])
    if opcode == OP_TEXT and rnd.random() < 0.7:
        payload = "".join(rnd.choice("ab\u00fc\u20ac\U0001f600") for _ in range(n // 3 + 1)).encode()[:n]
    else:
        payload = rnd.randbytes(n)
    if opcode == OP_CLOSE and rnd.random() < 0.5:
        payload = close_payload(rnd.choice([1000, 1001, 3000, 1005, 999, 4999, 5000]), b"r")
    kw = dict(fin=rnd.random() < 0.8, rsv=rnd.choice([0] * 8 + [1, 2, 4]), mask=rnd.random() < 0.95,
              length_bytes=rnd.choice([None] * 6 + [2, 8]))
    if kw["length_bytes"] == 2 and len(payload) > 0xFFFF:
        kw["length_bytes"] = 8
    if kw["length_bytes"] is None or (kw["length_bytes"] == 0 and len(payload) > 125):
        kw["length_bytes"] = None
    if rnd.random() < 0.05:  # a lying length; the stream then ends short
        kw["declared_length"] = rnd.choice([len(payload) + 10, (1 << 63) + 1, (1 << 32)])
        kw["length_bytes"] = 8
    return build_frame(opcode, payload, **kw)


def fuzz_case(port: int, seed: int) -> str:
    rnd = random.Random(seed)
    stream = b"".join(random_frame(rnd) for _ in range(rnd.randint(1, 5)))
    with connect(port) as c:
        c.auto_pong = False
        c.send(stream, chunks=rnd.choice([None, 1, 7, 1000]) if len(stream) < 5000 else None, ignore_errors=True)
        deadline = time.monotonic() + 1.0
        while True:
            try:
                f = c.recv_frame(max(0.05, deadline - time.monotonic()))
            except (ReadTimeout, ConnectionClosed):
                return "open" if not c.eof else "tcp"
            if f.opcode == OP_CLOSE:
                assert valid_close_code(f.close_code), f"seed {seed}: server sent close code {f.close_code}"
                return f"close {f.close_code}"


def test_fuzz_random_frames_never_break_the_server(srv):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=16) as pool:
        outcomes = list(pool.map(lambda s: fuzz_case(srv.port, s), range(1000)))
    assert srv.proc.poll() is None, "relay died under fuzzed frames"
    print({o: outcomes.count(o) for o in set(outcomes)})
