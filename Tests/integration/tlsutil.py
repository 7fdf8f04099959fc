"""Certificates for TLS tests, made with the `openssl` command as an operator would."""
from __future__ import annotations

import ssl
import subprocess
from pathlib import Path


def make_pair(directory: Path, name: str = "server", kind: str = "ec", cn: str = "localhost") -> tuple[Path, Path]:
    """A self-signed certificate for localhost / 127.0.0.1 and its key (PEM)."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    key_args = ["-newkey", "rsa:2048"] if kind == "rsa" else ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
    subprocess.run(
        ["openssl", "req", "-x509", "-nodes", "-days", "2", "-subj", f"/CN={cn}", "-keyout", str(key), "-out", str(cert),
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", *key_args],
        check=True, capture_output=True, timeout=60)
    return cert, key


def client_context(cafile: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(cafile))
    return ctx
