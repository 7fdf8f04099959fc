#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build (and, with --test, to
# test) Relay. Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
[ "${1:-}" = "--test" ] && want_test=1

sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)

apt_pkgs=(libuv1-dev libssl-dev libcurl4-openssl-dev pkg-config)
# chromium + chromium-driver: the demo page's browser tests (Tests/integration/test_demo_browser.py);
# redis-server, redis-sentinel, haproxy, faketime: the cluster tests (faketime runs a node
# with a skewed wall clock); npm + node-typescript: the JS client's package and type checks;
# nghttp2-server: nghttpd, the HTTP/2 sink of the push benchmark (Benchmarks/push.py).
[ $want_test -eq 1 ] && apt_pkgs+=(node-ws nodejs redis-server redis-sentinel haproxy faketime chromium chromium-driver npm node-typescript nghttp2-server)

missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# node-ws needs a nodejs; an existing node binary (e.g. from another source) is fine.
if [ ${#missing[@]} -gt 0 ]; then
  if [[ " ${missing[*]} " == *" nodejs "* ]] && command -v node >/dev/null 2>&1; then
    missing=("${missing[@]/nodejs}")
  fi
  # A nodejs that bundles npm conflicts with Debian's npm package: its npm is fine.
  if [[ " ${missing[*]} " == *" npm "* ]] && command -v npm >/dev/null 2>&1; then
    missing=("${missing[@]/npm}")
  fi
fi
missing=($(printf '%s\n' "${missing[@]}" | sed '/^$/d'))
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v swift >/dev/null 2>&1; then
  echo "swift is not on PATH: install Swift 6 (https://www.swift.org/install/linux/)" >&2
  exit 1
fi

if [ $want_test -eq 1 ]; then
  python3 -m pip install -q --disable-pip-version-check -r Tests/integration/requirements.txt
fi
