"""One test per protocol/scenarios/*.json: replay it against a freshly started relay.

Each scenario runs on its own `relay serve` (dev mode, the scenario's `flags`),
started through the `relay_factory` fixture of conftest.py. The runner and the
scenario format: scenario_runner.py and protocol/scenarios/README.md.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import conftest
from scenario_runner import Schemas, load_scenarios, run_scenario

SCENARIOS = load_scenarios()


@pytest.fixture(scope="module")
def schemas() -> Schemas:
    return Schemas()


def _binary_available() -> bool:
    try:
        conftest.relay_binary()
    except RuntimeError:
        return False
    return True


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
async def test_scenario(path: Path, relay_factory, schemas: Schemas) -> None:
    if not _binary_available():
        pytest.skip("relay binary not built (swift build) and RELAY_BIN not set")
    scenario = json.loads(path.read_text(encoding="utf-8"))
    relay = relay_factory(*scenario.get("flags", []))
    await run_scenario(scenario, relay.ws, schemas)
