#!/usr/bin/env bash
# `make bench`: load the relay (and, for comparison, plain room-broadcast
# servers in Node `ws` and Python `websockets`) with relay-bots and write
# Benchmarks/results/latest.md.
#
#   Benchmarks/run.sh [fanout] [rate] [idle] [storm] [ramp]     (default: all five)
#   Benchmarks/run.sh summarize Benchmarks/results/raw/<stamp>   (tables only)
#
# BENCH_PORT fixes the server port (default: any free one).
# Server pinned to core 0, bots to core 1 (taskset), loopback only. Each
# configuration runs BENCH_RUNS times (default 3); tables show the median.
# Server CPU comes from /proc/PID/stat (utime+stime) sampled when the bots
# start their measured phase and when it ends; RSS from /proc/PID/status.
# Raw per-run JSON and logs go to Benchmarks/results/raw/<stamp>/ (ignored by git).
# Never part of the test suite. A full run takes about 12 minutes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUNS="${BENCH_RUNS:-3}"
SWIFT="${SWIFT:-swift}"
# As `make release`: no dynamic exclusivity checks (a command-line flag; Package.swift says why).
RELEASE_FLAGS="${RELEASE_FLAGS:--c release -Xswiftc -enforce-exclusivity=unchecked}"
BIN="$ROOT/.build/release"
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
RAW="$ROOT/Benchmarks/results/raw/$STAMP"
RECORDS="$RAW/records.jsonl"
CLK_TCK="$(getconf CLK_TCK)"
SERVER_CPU=0
BOTS_CPU=1
[ "$(nproc)" -ge 2 ] || { SERVER_CPU=0; BOTS_CPU=0; echo "warning: one core only; server and bots share it" >&2; }

CONFIGS=("$@")
[ ${#CONFIGS[@]} -gt 0 ] || CONFIGS=(fanout rate idle storm ramp)
[ "${CONFIGS[0]}" = summarize ] && CONFIGS=()
for c in "${CONFIGS[@]}"; do
  case "$c" in fanout | rate | idle | storm | ramp) ;; *) echo "unknown configuration '$c' (fanout rate idle storm ramp)" >&2; exit 2 ;; esac
done

if [ "${1:-}" != summarize ]; then
  mkdir -p "$RAW"
  : >"$RECORDS"
fi
SERVER_PID=""

cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits until a TCP port accepts connections (bounded).
wait_port() {
  local port="$1" deadline=$((SECONDS + 20))
  until python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$port),0.2)" 2>/dev/null; do
    ((SECONDS < deadline)) || { echo "server on port $port did not start" >&2; return 1; }
    sleep 0.1
  done
}

# start_server TARGET PORT LOG [relay flags...]: sets SERVER_PID.
start_server() {
  local target="$1" port="$2" log="$3"
  shift 3
  case "$target" in
    relay) taskset -c "$SERVER_CPU" "$BIN/relay" serve --listen "127.0.0.1:$port" --log-level warning "$@" >"$log" 2>&1 & ;;
    node) taskset -c "$SERVER_CPU" node Benchmarks/peers/node-ws-broadcast.js --port "$port" "$@" >"$log" 2>&1 & ;;
    python) taskset -c "$SERVER_CPU" python3 Benchmarks/peers/python-websockets-broadcast.py --port "$port" "$@" >"$log" 2>&1 & ;;
    floor) taskset -c "$SERVER_CPU" "$ROOT/.build/floor" --port "$port" "$@" >"$log" 2>&1 & ;;
    # The floor whose clients also reply to the server (a ping right after the
    # upgrade, then every 10 s, like Relay's heartbeat): their sockets then enter
    # TCP's interactive delayed-ACK mode as Relay's clients' do (hello, join,
    # pongs), which moves ACK work onto the server's core on loopback
    # (Benchmarks/results/fanout-kernel.md).
    floor-ping) taskset -c "$SERVER_CPU" "$ROOT/.build/floor" --port "$port" --ping-ms 10000 "$@" >"$log" 2>&1 & ;;
  esac
  SERVER_PID=$!
  wait_port "$port"
}

stop_server() {
  cleanup
  SERVER_PID=""
}

cpu_us() { awk -v t="$CLK_TCK" '{ printf "%d", ($14 + $15) * 1000000 / t }' "/proc/$1/stat"; }
# Kernel-mode share alone (stime): heartbeats are mostly the kernel's loopback send.
sys_us() { awk -v t="$CLK_TCK" '{ printf "%d", $15 * 1000000 / t }' "/proc/$1/stat"; }
# Summed CPU of the bot processes (relay-bots is the client; if it is near
# 100 % of its core, the client, not the server, limited the figure).
bots_cpu_us() {
  local total=0 p
  for p in "$@"; do [ -r "/proc/$p/stat" ] && total=$((total + $(cpu_us "$p"))); done
  echo "$total"
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
# Bytes the process wrote and its write syscalls (/proc/PID/io): bytes per delivery
# and deliveries per write, to compare servers at equal bytes.
io_field() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/io"; }
# Anonymous resident memory: heap and stacks, without the shared library and
# binary pages that RSS also counts (those are paged in once, not per connection).
anon_kb() { awk '/^RssAnon:/ { print $2 }' "/proc/$1/status"; }
# Time the hypervisor took from this VM's CPUs (steal, all CPUs), in µs: tail
# latencies on a shared machine follow it.
steal_us() { awk -v t="$CLK_TCK" '/^cpu / { printf "%d", $9 * 1000000 / t }' /proc/stat; }
now_us() { echo $(($(date +%s%N) / 1000)); }

# wait_line FILE PATTERN TIMEOUT_S: polls a bots log for a phase line.
wait_line() {
  local deadline=$((SECONDS + $3))
  until grep -q "$2" "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}

# measure NAME TARGET SCENARIO SHARDS [bots flags...]: one run of the bots
# against the running server; appends one record to $RECORDS.
measure() {
  local name="$1" target="$2" scenario="$3" shards="$4" port="$5"
  shift 5
  local url proto=() pids=() k
  if [ "$target" = relay ]; then url="ws://127.0.0.1:$port/v1/ws"; proto=(--dev); else url="ws://127.0.0.1:$port"; proto=(--protocol broadcast); fi
  for ((k = 0; k < shards; k++)); do
    taskset -c "$BOTS_CPU" "$BIN/relay-bots" run "$scenario" --url "$url" "${proto[@]}" --shard "$k/$shards" \
      --json "$RAW/$name.$k.json" "$@" >"$RAW/$name.$k.out" 2>"$RAW/$name.$k.err" &
    pids+=($!)
  done
  for ((k = 0; k < shards; k++)); do wait_line "$RAW/$name.$k.err" "running for" 120 || echo "  $name: shard $k never started its run" >&2; done
  local cpu0 t0 cpu1 t1 rss anon bots0 bots1 sys0 sys1
  cpu0=$(cpu_us "$SERVER_PID")
  sys0=$(sys_us "$SERVER_PID")
  local wchar0 syscw0 wchar1 syscw1
  wchar0=$(io_field "$SERVER_PID" wchar)
  syscw0=$(io_field "$SERVER_PID" syscw)
  local steal0 steal1
  steal0=$(steal_us)
  bots0=$(bots_cpu_us "${pids[@]}")
  t0=$(now_us)
  # Sleep through the measured phase instead of polling it: every poll is a new
  # process on one of the two measured cores, and at 20 polls/s that alone moved
  # the 20 000/s p99 from about 1.6 ms to 3-8 ms.
  local run_ms
  run_ms=$(sed -n 's/.*running for \([0-9]*\) ms.*/\1/p' "$RAW/$name.0.err" | head -1)
  [ -n "$run_ms" ] && [ "$run_ms" -gt 500 ] && sleep "$(awk -v m="$run_ms" 'BEGIN { printf "%.2f", (m - 300) / 1000 }')"
  wait_line "$RAW/$name.0.err" "run over" 600 || true
  cpu1=$(cpu_us "$SERVER_PID")
  sys1=$(sys_us "$SERVER_PID")
  wchar1=$(io_field "$SERVER_PID" wchar)
  syscw1=$(io_field "$SERVER_PID" syscw)
  steal1=$(steal_us)
  bots1=$(bots_cpu_us "${pids[@]}")
  t1=$(now_us)
  rss=$(rss_kb "$SERVER_PID")
  anon=$(anon_kb "$SERVER_PID")
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  python3 - "$RECORDS" "$name" "$target" "$scenario" "$shards" "$((cpu1 - cpu0))" "$((t1 - t0))" "$rss" "$rc" "$RAW" "$((bots1 - bots0))" "$anon" "$((sys1 - sys0))" "$((steal1 - steal0))" "$((wchar1 - wchar0))" "$((syscw1 - syscw0))" <<'EOF'
import json, statistics, sys
records, name, target, scenario, shards, cpu_us, wall_us, rss, rc, raw, bots_cpu_us, anon, sys_us, steal_us, wchar, syscw = sys.argv[1:]
reports = [json.load(open(f"{raw}/{name}.{k}.json")) for k in range(int(shards))]
deliv = sum(r["deliveriesReceived"] for r in reports)
dur_s = max(r["durationMs"] for r in reports) / 1000
lat = reports[0]["deliveryLatencyUs"]
hand = reports[0]["handLatencyUs"]
rec = dict(name=name, target=target, scenario=scenario, rc=int(rc),
           bots=sum(r["bots"] for r in reports), deliveries=deliv,
           deliveriesPerSec=deliv / dur_s if dur_s else 0,
           cpuUs=int(cpu_us), wallUs=int(wall_us), cpuPct=100 * int(cpu_us) / max(1, int(wall_us)),
           botsCpuPct=100 * int(bots_cpu_us) / max(1, int(wall_us)),
           botsCpuUsPerDelivery=int(bots_cpu_us) / deliv if deliv else None,
           botsFramesPerRead=sum(r.get("framesReceived", 0) for r in reports) / max(1, sum(r.get("reads", 0) for r in reports)),
           cpuUsPer1000=1000 * int(cpu_us) / deliv if deliv else None,
           sysPct=100 * int(sys_us) / max(1, int(wall_us)),
           stealPct=100 * int(steal_us) / max(1, int(wall_us)) / 2,
           kernelUsPerDelivery=int(sys_us) / deliv if deliv else None,
           userUsPerDelivery=(int(cpu_us) - int(sys_us)) / deliv if deliv else None,
           bytesPerDelivery=int(wchar) / deliv if deliv else None,
           deliveriesPerWrite=deliv / int(syscw) if int(syscw) else None,
           rssKb=int(rss), anonKb=int(anon), p50=lat["p50"], p99=lat["p99"], p999=lat["p999"],
           handP50=hand["p50"], handP99=hand["p99"], handP999=hand["p999"], handCount=hand["count"],
           readyAfterMs=max(r.get("readyAfterMs", 0) for r in reports),
           connectP50=statistics.median(r["connectReadyUs"]["p50"] for r in reports if "connectReadyUs" in r) if any("connectReadyUs" in r for r in reports) else None,
           connectP99=max((r["connectReadyUs"]["p99"] for r in reports if "connectReadyUs" in r), default=None),
           handCommands=sum(r["handCommands"] for r in reports),
           calls=sum(r["callsStarted"] for r in reports),
           callsResolved=sum(r["callsResolved"] for r in reports),
           checkFailures=sum(r["checkFailures"] for r in reports),
           notes=sorted({n for r in reports for n in r["notes"]}))
open(records, "a").write(json.dumps(rec) + "\n")
print(f"  {name}: {rec['deliveriesPerSec']:.0f} deliveries/s, server CPU {rec['cpuPct']:.0f}%, "
      f"bots CPU {rec['botsCpuPct']:.0f}% ({(rec['botsCpuUsPerDelivery'] or 0):.2f} us/delivery), RSS {rec['rssKb']} kB, p99 {rec['p99']} us, check failures {rec['checkFailures']}", flush=True)
EOF
}

# bench TARGET SCENARIO SHARDS [relay flags --] [bots flags]: RUNS fresh servers, one measure each.
bench() {
  local target="$1" scenario="$2" shards="$3"
  shift 3
  local relay_flags=() r port baseline
  while [ $# -gt 0 ] && [ "$1" != -- ]; do relay_flags+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  # ROUND=k: only run k (so that configurations can alternate run by run).
  local first="${ROUND:-1}" last="${ROUND:-$RUNS}"
  for ((r = first; r <= last; r++)); do
    port="${BENCH_PORT:-$(free_port)}"
    start_server "$target" "$port" "$RAW/$scenario.$target.$r.server.log" "${relay_flags[@]}"
    baseline=$(rss_kb "$SERVER_PID")
    echo "{\"name\":\"$scenario.$target.$r\",\"baselineRssKb\":$baseline,\"baselineAnonKb\":$(anon_kb "$SERVER_PID")}" >>"$RAW/baselines.jsonl"
    measure "$scenario.$target.$r" "$target" "$scenario" "$shards" "$port" "$@"
    stop_server
  done
}

# summarize RAWDIR: medians per configuration → Benchmarks/results/latest.md.
summarize() {
python3 - "$1" "$ROOT/Benchmarks/results/latest.md" "$RUNS" <<'EOF'
import json, statistics, subprocess, sys, datetime, os
raw, out, runs = sys.argv[1], sys.argv[2], sys.argv[3]
recs = [json.loads(l) for l in open(f"{raw}/records.jsonl")]
base, base_anon = {}, {}
if os.path.exists(f"{raw}/baselines.jsonl"):
    bases = [json.loads(l) for l in open(f"{raw}/baselines.jsonl")]
    base = {j["name"]: j["baselineRssKb"] for j in bases}
    base_anon = {j["name"]: j.get("baselineAnonKb", 0) for j in bases}
def sh(cmd):
    try: return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception: return "?"
MODEL = sh("lscpu | grep 'Model name' | sed 's/Model name:[ ]*//'")
LOAD = " ".join(open("/proc/loadavg").read().split()[:3])
def group(scenario, target):
    return [r for r in recs if r["scenario"] == scenario and r["target"] == target]
def med(rs, key):
    vals = [r[key] for r in rs if r.get(key) is not None]
    return statistics.median(vals) if vals else None
def f(v, d=0):
    return "-" if v is None else f"{v:,.{d}f}"
def ms(us):
    return "-" if us is None else f"{us/1000:.2f}"
def fails(rs):
    return sum(r["checkFailures"] for r in rs)
L = ["# Benchmark results", "",
     f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
     f"- machine: {sh('nproc')} CPUs, {MODEL}",
     f"- commit: {sh('git rev-parse --short HEAD')} ({sh('git rev-parse --abbrev-ref HEAD')})",
     f"- load when the tables were written: {LOAD} (the machine is shared; "
     "figures move with other tenants' load)",
     f"- method: server on core 0, relay-bots on core 1 (taskset), loopback; median of {runs} runs; "
     "server CPU = utime+stime over the bots' measured phase; raw data in Benchmarks/results/raw/", ""]
if any(r["scenario"] == "fanout" for r in recs):
    L += ["## 1. Max fan-out (10 sessions x 100 members, one publisher per session, 8 messages in flight, ~30-byte payload)", "",
          "| server | deliveries/s | server CPU % | CPU µs / 1 000 deliveries | p50 ms | p99 ms | server RSS MB | bots CPU % | bots CPU µs / delivery | check failures |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for t, label in (("relay", "Relay"), ("node", "Node ws 8 broadcast"), ("python", "Python websockets broadcast")):
        rs = group("fanout", t)
        if rs:
            L.append(f"| {label} | {f(med(rs,'deliveriesPerSec'))} | {f(med(rs,'cpuPct'))} | {f(med(rs,'cpuUsPer1000'),1)} | "
                     f"{ms(med(rs,'p50'))} | {ms(med(rs,'p99'))} | {f((med(rs,'rssKb') or 0)/1024,1)} | {f(med(rs,'botsCpuPct'))} | "
                     f"{f(med(rs,'botsCpuUsPerDelivery'),2)} | {fails(rs)} |")
    L += ["", "Latency here is queueing under saturation (8 messages in flight per publisher), not the idle path. "
          "When bots CPU % is near 100, the client core, not the server, set the deliveries/s ceiling; "
          "CPU µs per 1 000 deliveries is the comparable figure. Bots CPU µs / delivery is relay-bots' own cost "
          "(user + kernel, over the same window); 1 / that is roughly what one bots core can receive.", ""]
if any(r["scenario"] == "fanout-floor" for r in recs):
    L += ["## 1b. Relay against the floor at equal bytes (Benchmarks/floor/floor.c)", "",
          "The floor is a minimal C/libuv room broadcast: each frame copied into one contiguous buffer per "
          "connection, one write per connection per loop turn. It is driven with bots/fanout-floor.json, whose "
          "payload is padded so its frames are about as long as Relay's message events. "
          "'Clients pinged': the floor also pings each client after its upgrade and every 10 s, so the clients "
          "reply shortly after receiving, as Relay's do (hello, join, pongs); their sockets then use TCP's "
          "interactive delayed-ACK mode and, on loopback, ACK from inside the server's writes "
          "(Benchmarks/results/fanout-kernel.md). That row is the like-for-like kernel figure.", "",
          "| server | deliveries/s | kernel µs / delivery | user µs / delivery | bytes written / delivery | deliveries / write | p50 ms | p99 ms | check failures |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s_, t, label in (("fanout", "relay", "Relay"), ("fanout-floor", "floor", "C floor"),
                         ("fanout-floor", "floor-ping", "C floor, clients pinged")):
        rs = group(s_, t)
        if rs:
            L.append(f"| {label} | {f(med(rs,'deliveriesPerSec'))} | {f(med(rs,'kernelUsPerDelivery'),3)} | "
                     f"{f(med(rs,'userUsPerDelivery'),3)} | {f(med(rs,'bytesPerDelivery'),1)} | {f(med(rs,'deliveriesPerWrite'),1)} | "
                     f"{ms(med(rs,'p50'))} | {ms(med(rs,'p99'))} | {fails(rs)} |")
    L += [""]
if any(r["scenario"].startswith("rate-") for r in recs):
    L += ["## 2. Fixed message rate into 10 x 100 (Relay)", "",
          "| offered msg/s | deliveries/s | p50 ms | p99 ms | p99.9 ms | server CPU % | CPU µs / 1 000 deliveries | bots CPU % | steal % | p99 ms of each run | check failures |",
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in ("rate-200", "rate-1000", "rate-20000"):
        rs = group(s, "relay")
        if rs:
            L.append(f"| {s[5:]} | {f(med(rs,'deliveriesPerSec'))} | {ms(med(rs,'p50'))} | {ms(med(rs,'p99'))} | {ms(med(rs,'p999'))} | "
                     f"{f(med(rs,'cpuPct'),1)} | {f(med(rs,'cpuUsPer1000'),1)} | {f(med(rs,'botsCpuPct'))} | {f(med(rs,'stealPct'),1)} | "
                     f"{', '.join(ms(r['p99']) for r in rs)} | {fails(rs)} |")
    L += ["", "Steal % is the share of the VM's CPUs the hypervisor took during the run (from /proc/stat): "
          "the tail of these latencies moves with it and with other tenants' load.", ""]
if any(r["scenario"].startswith("idle-") for r in recs):
    L += ["## 3. Idle joined connections with heartbeats (30 s, ping every 10 000 ms)", "",
          "| server | connections | RSS MB | RSS / connections KiB | ΔRSS / connection KiB | ΔRssAnon / connection KiB | CPU % | of which kernel % | check failures |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in ("idle-5000", "idle-19900"):
        for t, label in (("relay", "Relay"), ("node", "Node ws, ping every 10 s"), ("python", "Python websockets, ping every 10 s")):
            rs = group(s, t)
            if not rs:
                continue
            total = [r["rssKb"] / r["bots"] for r in rs]
            per = [(r["rssKb"] - base.get(r["name"], 0)) / r["bots"] for r in rs]
            anon = [(r.get("anonKb", 0) - base_anon.get(r["name"], 0)) / r["bots"] for r in rs]
            L.append(f"| {label} | {rs[0]['bots']:,} | {f(med(rs,'rssKb')/1024,1)} | {f(statistics.median(total),2)} | "
                     f"{f(statistics.median(per),2)} | {f(statistics.median(anon),2)} | {f(med(rs,'cpuPct'),2)} | {f(med(rs,'sysPct'),2)} | {fails(rs)} |")
    L += ["", "RSS / connections = RSS with the bots joined ÷ connections (fixed costs included). "
          "ΔRSS = RSS with the bots joined − RSS right after start: it also counts library and binary pages the run "
          "first touches (file-backed, shared, paid once). ΔRssAnon counts anonymous memory only (heap, stacks): "
          "what each further connection costs. Kernel % = stime: the ping writes and pong reads themselves.", ""]
if any(r["scenario"] == "ramp-19900" for r in recs):
    L += ["## 5. Connection ramp (19 900 connections opened as fast as two bots shards can, on one core)", "",
          "| server | what each connection does | all ready after ms | connect → ready p50 ms | p99 ms | ready ms, each run | check failures |",
          "|---|---|---:|---:|---:|---|---:|"]
    for t, label, what in (("relay", "Relay", "upgrade, hello, join (snapshot of up to 100 members)"), ("floor", "C floor", "upgrade only")):
        rs = group("ramp-19900", t)
        if rs:
            L.append(f"| {label} | {what} | {f(med(rs,'readyAfterMs'))} | {ms(med(rs,'connectP50'))} | {ms(med(rs,'connectP99'))} | "
                     f"{', '.join(f(r['readyAfterMs']) for r in rs)} | {fails(rs)} |")
    L += ["", "Connect → ready: a bot's TCP connect until it is upgraded (floor) or welcomed and joined (Relay).", ""]
if any(r["scenario"] in ("hand-storm", "ring-storm") for r in recs):
    L += ["## 4. Storms (Relay)", ""]
    rs = group("hand-storm", "relay")
    if rs:
        secs = med(rs, 'wallUs') / 1e6
        L += ["| raise-hand storm, 1 000 members | hand commands | hand events delivered/s | hand event p50 ms | p99 ms | p99.9 ms | server CPU % | bots CPU % | check failures |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
              f"| 200 raise/lower per s | {f(med(rs,'handCommands'))} | {f(med(rs,'handCount')/secs)} | {ms(med(rs,'handP50'))} | {ms(med(rs,'handP99'))} | "
              f"{ms(med(rs,'handP999'))} | {f(med(rs,'cpuPct'),1)} | {f(med(rs,'botsCpuPct'))} | {fails(rs)} |", "",
              "Every hand event reaches all 1 000 members; hand latency is command sent → each member's receipt.", ""]
    rs = group("ring-storm", "relay")
    if rs:
        unsupported = any("ringing unsupported" in n for r in rs for n in r["notes"])
        if unsupported:
            L += ["Ringing storm: skipped, the relay does not support calls yet (call.* answered as unavailable).", ""]
        else:
            L += ["| ringing storm | calls placed | callee legs resolved | server CPU % | check failures |", "|---|---:|---:|---:|---:|",
                  f"| 100 calls/s among 1 000 | {f(med(rs,'calls'))} | {f(med(rs,'callsResolved'))} | {f(med(rs,'cpuPct'),1)} | {fails(rs)} |", ""]
open(out, "w").write("\n".join(L) + "\n")
print("\n".join(L))
EOF
}

if [ "${1:-}" = summarize ]; then summarize "$2"; exit 0; fi

echo "building release…" >&2
# shellcheck disable=SC2086  # RELEASE_FLAGS is a list of words
"$SWIFT" build $RELEASE_FLAGS --product relay >&2
# shellcheck disable=SC2086
"$SWIFT" build $RELEASE_FLAGS --product relay-bots >&2
cc -O2 -o "$ROOT/.build/floor" Benchmarks/floor/floor.c -luv -lcrypto >&2

for c in "${CONFIGS[@]}"; do
  case "$c" in
    fanout)
      echo "== fan-out (10 sessions x 100 members, 1 publisher/session, 8 in flight)" >&2
      # Relay and the two floors alternate run by run, so load from other tenants
      # falls on all three alike.
      for ((round = 1; round <= RUNS; round++)); do
        ROUND=$round bench relay fanout 1 --message-rate 1000000 --max-outbound-bytes 16777216 -- --quiet
        ROUND=$round bench floor fanout-floor 1 -- --quiet
        ROUND=$round bench floor-ping fanout-floor 1 -- --quiet
      done
      bench node fanout 1 -- --quiet
      bench python fanout 1 -- --quiet
      ;;
    rate)
      echo "== fixed rates (200 and 1 000 msg/s into 10 x 100)" >&2
      bench relay rate-200 1 -- --quiet --duration 10000
      bench relay rate-1000 1 -- --quiet --duration 10000
      # 20 000 messages/s into 10 x 100: 2 M deliveries/s offered.
      bench relay rate-20000 1 --message-rate 1000000 --max-outbound-bytes 16777216 -- --quiet --duration 10000
      ;;
    ramp)
      echo "== connection ramp (19 900 connections as fast as the bots open them)" >&2
      for ((round = 1; round <= RUNS; round++)); do
        ROUND=$round bench relay ramp-19900 2 -- --quiet
        ROUND=$round bench floor ramp-19900 2 -- --quiet
      done
      ;;
    idle)
      echo "== idle connections with heartbeats (30 s)" >&2
      bench relay idle-5000 1 -- --quiet
      # The measured 30 s window starts only once every bot has joined. The
      # bots leave from eight loopback source addresses, so Linux's connect()
      # port search stays short past 14 000 connections.
      bench relay idle-19900 2 -- --quiet
      # The same idle sockets and the same ping rate on Node's ws, for scale.
      bench node idle-19900 2 --ping-interval 10000 -- --quiet
      ;;
    storm)
      echo "== raise-hand storm (1 000 members) and ringing storm" >&2
      # 1 000 members join one session at once: past the default per-session join
      # budget (--session-join-rate, an abuse bound), which this load is not.
      bench relay hand-storm 1 --session-join-rate 0 -- --quiet
      bench relay ring-storm 1 --ring-timeout 5000 -- --quiet
      ;;
  esac
done

summarize "$RAW"
echo "wrote Benchmarks/results/latest.md (raw: $RAW)" >&2
