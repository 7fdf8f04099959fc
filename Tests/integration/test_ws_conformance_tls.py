"""The RFC 6455 conformance cases of test_ws_conformance.py, once more over TLS:
the same raw frames, sent through the relay's TLS listener (`--tls-cert`), so the
TLS layer is shown to hand the frame layer exactly the bytes it was sent, split
wherever TLS records and TCP segments fall."""
from __future__ import annotations

import pytest

import wsraw
from test_ws_conformance import *  # noqa: F401,F403  (the cases, collected again here)
from tlsutil import client_context, make_pair


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    return make_pair(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def echo_relay(relay_factory, tls_files):
    """Overrides conftest's: the echo relay behind TLS, and raw clients that speak it."""
    cert, key = tls_files
    relay = relay_factory("--echo", "--tls-cert", str(cert), "--tls-key", str(key), tls_ca=cert)
    wsraw.TLS_CONTEXT = client_context(cert)
    yield relay
    wsraw.TLS_CONTEXT = None
