#!/usr/bin/env bash
# `make bench-tls-floor`: builds tls_idle.c, makes an ECDSA P-256 and an RSA 2048
# self-signed pair in a temporary directory, and prints, as Markdown, the heap held
# per idle server SSL for Relay's settings and for each variation
# (Benchmarks/tls-floor/README.md). Deterministic: no sockets, one process.
#
#   Benchmarks/tls-floor/run.sh            the table (N=2000) and the 10 000 headline
#   TLS_FLOOR_N=500 Benchmarks/tls-floor/run.sh   a quicker table
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
N="${TLS_FLOOR_N:-2000}"
BIG="${TLS_FLOOR_BIG:-10000}"
OUT="$ROOT/.build/tls-floor"
mkdir -p "$OUT"
cc -O2 -Wall -Wextra -o "$OUT/tls_idle" "$ROOT/Benchmarks/tls-floor/tls_idle.c" -lssl -lcrypto

KEYS="$(mktemp -d)"
trap 'rm -rf "$KEYS"' EXIT
openssl req -x509 -nodes -days 2 -subj /CN=localhost -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
  -keyout "$KEYS/ec.key" -out "$KEYS/ec.crt" 2>/dev/null
openssl req -x509 -nodes -days 2 -subj /CN=localhost -newkey rsa:2048 \
  -keyout "$KEYS/rsa.key" -out "$KEYS/rsa.crt" 2>/dev/null

# field NAME LINE: the value of NAME=... in tls_idle's one-line result.
field() { sed -n "s/.*[ ]$1=\([^ ]*\).*/\1/p" <<<"$2"; }

run() { # key n args...
  local key="$1" n="$2"
  shift 2
  "$OUT/tls_idle" --quiet --n "$n" --cert "$KEYS/$key.crt" --key "$KEYS/$key.key" "$@"
}

echo "\`openssl version\`: $(openssl version); linked by tls_idle: $("$OUT/tls_idle" --n 1 --cert "$KEYS/ec.crt" --key "$KEYS/ec.key" | sed -n 's/^openssl: //p'); $(cc --version | head -1)"
echo
echo "| setting (N=$N; Relay's settings otherwise) | version | cipher | heap B per idle server SSL | vs Relay's settings | just after SSL_new | RSS B per connection |"
echo "|---|---|---|---|---|---|---|"
for tls in 1.3 1.2; do
  ref=""
  while IFS='|' read -r label key args; do
    [ -n "$label" ] || continue
    # shellcheck disable=SC2086 # args is a list of options
    line="$(run "$key" "$N" --tls "$tls" $args)"
    idle="$(field idle "$line")"
    [ -n "$ref" ] || ref="$idle"
    printf '| %s | %s | %s | %s | %+d | %s | %s |\n' "$label" "$(field version "$line")" "$(field cipher "$line")" \
      "$idle" "$((idle - ref))" "$(field new "$line")" "$(field rss_idle "$line")"
  done <<EOF
Relay's settings (ECDSA P-256)|ec|
RSA 2048 certificate|rsa|
num_tickets 0|ec|--tickets 0
SSL_OP_NO_TICKET|ec|--no-ticket
session cache SERVER (instead of OFF)|ec|--cache server
without SSL_MODE_RELEASE_BUFFERS|ec|--no-release-buffers
without RELEASE_BUFFERS, SSL_free_buffers after the exchange|ec|--no-release-buffers --free-buffers
SSL_free_buffers after the exchange|ec|--free-buffers
BIO: two BIO_s_mem|ec|--bio mem
BIO: BIO_new_bio_pair (default 17 KiB buffers)|ec|--bio pair
AES-128-GCM|ec|--ciphers $([ "$tls" = 1.3 ] && echo TLS_AES_128_GCM_SHA256 || echo ECDHE-ECDSA-AES128-GCM-SHA256)
ChaCha20-Poly1305|ec|--ciphers $([ "$tls" = 1.3 ] && echo TLS_CHACHA20_POLY1305_SHA256 || echo ECDHE-ECDSA-CHACHA20-POLY1305)
renegotiation allowed (no SSL_OP_NO_RENEGOTIATION)|ec|--allow-reneg
no ALPN|ec|--no-alpn
client key share P-256 (instead of X25519)|ec|--groups P-256
SSL_set_session(ssl, NULL) after the handshake (unsafe, see results)|ec|--drop-session
EOF
done

med() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
echo
echo "| $BIG idle server SSLs (median of 3) | heap B per connection | RSS B per connection |"
echo "|---|---|---|"
for tls in 1.3 1.2; do
  for key in ec rsa; do
    heaps=() rss=()
    for _ in 1 2 3; do
      line="$(run "$key" "$BIG" --tls "$tls")"
      heaps+=("$(field idle "$line")")
      rss+=("$(field rss_idle "$line")")
    done
    printf '| TLS %s, %s, %s | %s | %s |\n' "$tls" "$(field cipher "$line")" \
      "$([ "$key" = ec ] && echo "ECDSA P-256" || echo "RSA 2048")" "$(med "${heaps[@]}")" "$(med "${rss[@]}")"
  done
done

echo
echo "Live bytes per idle server SSL by OpenSSL call site (TLS 1.3, Relay's settings, N=$N):"
echo
echo '```'
"$OUT/tls_idle" --n "$N" --cert "$KEYS/ec.crt" --key "$KEYS/ec.key" --sites | sed -n '/^live bytes/,$p'
echo '```'
