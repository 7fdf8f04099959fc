"""The pure targets stay pure (DESIGN.md): no C modules, no Foundation, no
Dispatch, no clocks, no environment, no unseeded randomness. A change that
breaks this goes red here, before it can leak non-determinism into the core."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE = ["RelayWebSocket", "RelayProtocol", "RelayCore", "RelayCluster", "RelayClientCore"]

FORBIDDEN = [
    (re.compile(r"^\s*(@\w+\s+)*(public |internal |package )?import\s+(CLibUV|COpenSSL|CRelayShims|EventLoop|RelayCrypto|Foundation\w*|Dispatch|Glibc|Darwin|Musl)\b", re.M), "imports a non-pure module"),
    (re.compile(r"\bDate\s*\(\s*\)"), "reads the wall clock"),
    (re.compile(r"\b(ContinuousClock|SuspendingClock|clock_gettime|gettimeofday|DispatchTime)\b"), "reads a clock"),
    (re.compile(r"\b(getenv|ProcessInfo)\b"), "reads the environment"),
    (re.compile(r"\b(SystemRandomNumberGenerator|arc4random|drand48)\b|\.random\(\s*in:(?![^)]*using:)[^)]*\)|\.random\(\s*\)|\.shuffled\(\s*\)"), "uses unseeded randomness"),
]


def pure_sources():
    for target in PURE:
        for path in sorted((ROOT / "Sources" / target).rglob("*.swift")):
            yield target, path


@pytest.mark.parametrize("target", PURE)
def test_pure_target_has_sources(target):
    assert list((ROOT / "Sources" / target).rglob("*.swift")), f"{target} has no sources"


def test_pure_targets_touch_no_io_clock_env_or_randomness():
    problems = []
    for target, path in pure_sources():
        text = path.read_text()
        code = re.sub(r"//.*", "", text)  # comments may name what is forbidden
        for pattern, why in FORBIDDEN:
            for m in pattern.finditer(code):
                line = code[: m.start()].count("\n") + 1
                problems.append(f"{path.relative_to(ROOT)}:{line}: {why}: {m.group(0).strip()}")
    assert not problems, "\n".join(problems)


def test_the_scan_catches_violations(tmp_path):
    """The patterns themselves can fail: each forbidden construct is detected."""
    samples = ["import Foundation", "import CLibUV", "let d = Date()", "getenv(\"X\")",
               "let x = Int.random(in: 0..<3)", "var g = SystemRandomNumberGenerator()"]
    for sample in samples:
        assert any(p.search(sample) for p, _ in FORBIDDEN), sample
    assert not any(p.search("let x = Int.random(in: 0..<3, using: &rng)") for p, _ in FORBIDDEN)
