"""The JS client as an npm package (clients/js/package.json).

- `npm pack` makes a tarball of exactly the module, its types and the manifest;
- `npm install --offline` puts it into an empty directory, like an app would;
- the app's TypeScript (Tests/integration/node/js-package/consumer.ts) is
  type-checked by Debian's tsc against the installed package's `.d.ts`, found
  through `exports`/`types`, with lines that must not type-check;
- `surface.ts` checks that `.d.ts` against the code: tsc derives declarations
  from relay-client.js, and the exported names, class members and method
  arities must be the same;
- the compiled app runs in Node (with Debian's `ws`) against a live relay.
Nothing is skipped: node, npm and tsc come with `make test-deps`.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "clients" / "js"
APP = ROOT / "Tests" / "integration" / "node" / "js-package"


def tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} missing: run `make test-deps`"
    return path


def run(args: list[str], cwd: Path, timeout: float = 120, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "npm_config_update_notifier": "false", **(env or {})})
    assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def test_manifest():
    manifest = json.loads((PACKAGE / "package.json").read_text())
    assert manifest["type"] == "module"
    assert manifest["exports"]["."] == {"types": "./relay-client.d.ts", "default": "./relay-client.js"}
    assert manifest["types"] == "./relay-client.d.ts"
    assert manifest["scripts"]["test"].startswith("node --test")
    assert not manifest.get("dependencies"), "the client has no runtime dependency"
    assert set(manifest["files"]) == {"relay-client.js", "relay-client.d.ts"}


@pytest.mark.timeout(240)
def test_packed_installed_typechecked_and_run(relay, tmp_path):
    npm, node, tsc = tool("npm"), tool("node"), tool("tsc")
    cache = tmp_path / "npm-cache"  # nothing of the user's npm cache is read or written
    npm_env = {"npm_config_cache": str(cache)}

    packed = json.loads(run([npm, "pack", "--json", "--pack-destination", str(tmp_path)], PACKAGE, env=npm_env))
    tarball = tmp_path / packed[0]["filename"]
    assert tarball.name == "relay-client-0.2.0.tgz"
    assert sorted(f["path"] for f in packed[0]["files"]) == ["package.json", "relay-client.d.ts", "relay-client.js"]

    app = tmp_path / "app"
    app.mkdir()
    run([npm, "install", "--offline", "--no-audit", "--no-fund", str(tarball)], app, env=npm_env)
    installed = app / "node_modules" / "relay-client"
    assert (installed / "relay-client.js").read_bytes() == (PACKAGE / "relay-client.js").read_bytes()
    # The app is an ES module written in TypeScript.
    manifest = json.loads((app / "package.json").read_text())
    assert manifest["dependencies"]["relay-client"].endswith("relay-client-0.2.0.tgz")
    (app / "package.json").write_text(json.dumps({**manifest, "type": "module"}))
    for name in ("consumer.ts", "surface.ts", "run.mjs", "tsconfig.json", "tsconfig.gen.json"):
        shutil.copy(APP / name, app / name)

    run([tsc, "-p", "tsconfig.gen.json"], app)  # declarations of the code itself, for surface.ts
    run([tsc, "-p", "tsconfig.json"], app)  # type-check both files; emit out/consumer.js

    env = {"NODE_PATH": os.pathsep.join(p for p in (os.environ.get("NODE_PATH"), "/usr/share/nodejs") if p)}
    out = run([node, "run.mjs", f"{relay.ws}/v1/ws"], app, timeout=60, env=env)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["version"] == "0.2.0"
    assert result["deep"] == "ERR_PACKAGE_PATH_NOT_EXPORTED"  # only "." and package.json are exported
    assert result["lines"] == [
        "welcome alice false",
        "joined room alice",
        "handraised bob",
        "incoming video true",
        "accepted bob",
        "error forbidden",
        "state open bob",
        "policy 400 true",
    ]
