"""The deployment files of docs/deploy.md are what they say: the compose files,
the Kubernetes manifests and the systemd unit parse, have the kinds and fields
an operator relies on, and agree on the numbers that must match (the drain
timeout against the time the engine waits before SIGKILL, the health check
on /readyz, the service names). Running them is test_containers.py's part
(compose); Kubernetes and systemd are not available here to run.
"""
from __future__ import annotations

import configparser
import shutil
import subprocess

import pytest
import yaml

from conftest import ROOT

DOCKER = ROOT / "docker"
DEPLOY = ROOT / "deploy"
NODES = ["relay1", "relay2", "relay3"]


def load(path) -> dict:
    with open(path) as f:
        return yaml.safe_load(f)


def seconds(duration: str) -> float:
    """Compose durations as these files write them: `15s`, `500ms`."""
    if duration.endswith("ms"):
        return int(duration[:-2]) / 1000
    assert duration.endswith("s"), duration
    return float(duration[:-1])


@pytest.mark.parametrize("name", ["docker-compose.yml", "docker-compose.host.yml"])
def test_compose_cluster_shape(name):
    compose = load(DOCKER / name)
    services = compose["services"]
    assert set(services) == {"redis", *NODES, "haproxy"}, set(services)
    for node in NODES:
        s = services[node]
        env = s["environment"]
        assert s["command"] == ["--node-id", node], s["command"]
        assert "RELAY_REDIS" in env and "RELAY_SECRET" in env, env
        # The image's single-node data dir is off in a cluster (--data-dir with --redis exits 64).
        assert env.get("RELAY_DATA_DIR") == "", env
        # SIGTERM drains within --drain-timeout; the engine waits longer before SIGKILL.
        drain_ms = int(str(env["RELAY_DRAIN_TIMEOUT"]).split(":-")[-1].rstrip("}"))
        assert s["stop_signal"] == "SIGTERM"
        assert seconds(s["stop_grace_period"]) * 1000 >= drain_ms + 2000, (node, s["stop_grace_period"], drain_ms)
        # ulimits replace the engine's defaults and fail above the host's hard limit here.
        assert "ulimits" not in s
    haproxy = services["haproxy"]
    assert any(v.startswith("./haproxy.cfg:") for v in haproxy["volumes"]), haproxy["volumes"]
    assert {f"RELAY_NODE{i}" for i in (1, 2, 3)} <= set(haproxy["environment"])
    assert sorted(haproxy["depends_on"]) == NODES


def test_published_compose_keeps_service_names_and_bridge_network():
    services = load(DOCKER / "docker-compose.yml")["services"]
    for name, s in services.items():
        assert "network_mode" not in s, name
    env = services["haproxy"]["environment"]
    assert [env[f"RELAY_NODE{i}"] for i in (1, 2, 3)] == [f"{n}:8080" for n in NODES]
    assert services["relay1"]["healthcheck"]["test"] == ["CMD", "relay", "probe"]
    assert services["relay1"]["environment"]["RELAY_REDIS"] == "redis://redis:6379"


def test_host_compose_is_loopback_only():
    services = load(DOCKER / "docker-compose.host.yml")["services"]
    for name, s in services.items():
        assert s["network_mode"] == "host", name
    for node in NODES:
        assert services[node]["environment"]["RELAY_LISTEN"].startswith("127.0.0.1:"), node
    assert "--bind" in services["redis"]["command"]
    assert services["redis"]["command"][services["redis"]["command"].index("--bind") + 1] == "127.0.0.1"
    for key in ("HAPROXY_BIND", "HAPROXY_STATS_BIND"):
        assert services["haproxy"]["environment"][key].startswith("127.0.0.1:"), key


def kubernetes() -> dict[str, dict]:
    with open(DEPLOY / "kubernetes" / "relay.yaml") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    by_kind = {d["kind"]: d for d in docs}
    assert len(by_kind) == len(docs), [d["kind"] for d in docs]
    return by_kind


def test_kubernetes_manifests():
    k = kubernetes()
    assert set(k) == {"Deployment", "Service", "PodDisruptionBudget"}, set(k)
    assert k["Deployment"]["apiVersion"] == "apps/v1"
    assert k["PodDisruptionBudget"]["apiVersion"] == "policy/v1"
    labels = k["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert k["Deployment"]["spec"]["selector"]["matchLabels"] == labels
    assert k["Service"]["spec"]["selector"] == labels
    assert k["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"] == labels
    # The budget leaves clients of a draining node somewhere to resume.
    replicas = k["Deployment"]["spec"]["replicas"]
    assert replicas >= 2 and k["PodDisruptionBudget"]["spec"].get("maxUnavailable", 0) < replicas

    pod = k["Deployment"]["spec"]["template"]["spec"]
    (relay,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in relay["env"]}
    port = relay["ports"][0]["containerPort"]
    assert env["RELAY_LISTEN"] == f"0.0.0.0:{port}"
    assert relay["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert k["Service"]["spec"]["ports"][0]["targetPort"] in (port, relay["ports"][0]["name"])
    # preStop, then the drain, must both end before the grace period's SIGKILL.
    pre_stop = relay["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep", pre_stop
    drain_ms = int(env["RELAY_DRAIN_TIMEOUT"])
    grace_s = pod["terminationGracePeriodSeconds"]
    assert grace_s * 1000 >= int(pre_stop[1]) * 1000 + drain_ms + 2000, (grace_s, pre_stop, drain_ms)
    # The image's user and data volume.
    assert pod["securityContext"]["runAsUser"] == 10001 and pod["securityContext"]["runAsNonRoot"] is True
    assert {m["mountPath"] for m in relay["volumeMounts"]} == {"/var/lib/relay"}
    # A cluster: the image's single-node data dir is off (empty).
    assert env.get("RELAY_DATA_DIR") == "" and "RELAY_REDIS" in env, env


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read(DEPLOY / "systemd" / "relay.service")
    return parser


def test_systemd_unit_fields_agree_with_its_environment():
    u = unit()
    assert set(u.sections()) == {"Unit", "Service", "Install"}, u.sections()
    service = u["Service"]
    assert service["ExecStart"].split()[1:] == ["serve"], service["ExecStart"]
    assert service["KillSignal"] == "SIGTERM"
    env = dict(line.split("=", 1) for line in (DEPLOY / "systemd" / "relay.env").read_text().splitlines()
               if line and not line.startswith("#"))
    assert int(service["TimeoutStopSec"]) * 1000 >= int(env["RELAY_DRAIN_TIMEOUT"]) + 2000
    assert service["StateDirectory"] == "relay"  # /var/lib/relay, as in the image
    assert env["RELAY_DATA_DIR"] == "/var/lib/relay" and env["RELAY_FSYNC"] in ("always", "everysec", "no"), env
    assert u["Install"]["WantedBy"] == "multi-user.target"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify(tmp_path):
    # verify wants the ExecStart binary to exist: point a copy of the unit at a stand-in.
    stand_in = tmp_path / "relay"
    stand_in.write_text("#!/bin/sh\n")
    stand_in.chmod(0o755)
    text = (DEPLOY / "systemd" / "relay.service").read_text()
    text = text.replace("/usr/local/bin/relay", str(stand_in)).replace("/etc/relay/relay.env", "-/etc/relay/relay.env")
    copy = tmp_path / "relay.service"
    copy.write_text(text)
    p = subprocess.run(["systemd-analyze", "verify", "--man=no", str(copy)], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    # Without a running systemd, verify still parses the unit and reports unknown keys and bad values.
    problems = [line for line in p.stdout.splitlines()
                if str(copy) in line and ("Unknown" in line or "Failed to parse" in line or "Invalid" in line)]
    assert not problems, p.stdout
