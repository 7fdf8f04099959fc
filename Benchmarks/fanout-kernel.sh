#!/usr/bin/env bash
# One fan-out run against one server binary, with the kernel-side figures that
# `Benchmarks/run.sh fanout` does not take: syscall mix, loop turns, TCP segments.
#
#   Benchmarks/fanout-kernel.sh relay BINARY [perf]    # bots/fanout.json, --dev
#   Benchmarks/fanout-kernel.sh floor BINARY [perf]    # bots/fanout-floor.json, broadcast
#                                                      # (FLOOR_FLAGS: extra floor flags)
#
# Server on core 0, relay-bots on core 1, loopback, as in run.sh. Prints one JSON
# line: deliveries/s, server kernel and user µs per delivery, bots µs per
# delivery, write syscalls per delivery, TCP segments per delivery (whole network
# namespace: other loopback traffic on the machine adds to it). With `perf`, also
# counts the server's syscalls by kind over 4 s of the measured phase
# (tracepoints; they add a little kernel time, so take the time figures from a run
# without it). With `record`, `perf record -g` of the server instead, into
# $PERF_DATA (default ./perf.data).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
target="$1" bin="$2" mode="${3:-}"
BOTS="${BOTS:-$ROOT/.build/release/relay-bots}"
tmp="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
if [ "$target" = relay ]; then
  taskset -c 0 "$bin" serve --listen "127.0.0.1:$port" --log-level warning --message-rate 1000000 \
    --max-outbound-bytes 16777216 >"$tmp/server.log" 2>&1 &
  url="ws://127.0.0.1:$port/v1/ws" proto=(--dev) scenario=bots/fanout.json
else
  taskset -c 0 "$bin" --port "$port" ${FLOOR_FLAGS:-} >"$tmp/server.log" 2>&1 &
  url="ws://127.0.0.1:$port" proto=(--protocol broadcast) scenario=bots/fanout-floor.json
fi
server=$!
trap 'kill $server 2>/dev/null || true; rm -rf "$tmp"' EXIT
until python3 -c "import socket; socket.create_connection(('127.0.0.1',$port),0.2)" 2>/dev/null; do sleep 0.1; done
taskset -c 1 "$BOTS" run "$scenario" --url "$url" "${proto[@]}" --json "$tmp/bots.json" --quiet >"$tmp/bots.out" 2>"$tmp/bots.err" &
bots=$!
until grep -q "running for" "$tmp/bots.err" 2>/dev/null; do sleep 0.05; done
snap() {
  local p="$1"
  awk '{ printf "%s %s ", $14, $15 }' "/proc/$p/stat"
  awk '$1 == "rchar:" || $1 == "wchar:" || $1 == "syscr:" || $1 == "syscw:" { printf "%s ", $2 }' "/proc/$p/io"
  awk '/^Tcp:/ { if (h) printf "%s %s ", $11, $12; h = 1 }' /proc/net/snmp
  awk '/^voluntary_ctxt_switches|^nonvoluntary_ctxt_switches/ { printf "%s ", $2 }' "/proc/$p/status"
  awk '{ printf "%s %s ", $14, $15 }' "/proc/$bots/stat"
  date +%s%N
}
cp /proc/net/netstat "$tmp/netstat0"
s0=$(snap $server)
if [ "$mode" = perf ]; then
  sleep 1
  perf stat -x, -p "$server" -e 'raw_syscalls:sys_enter,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_read,syscalls:sys_enter_readv,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_pwait2,syscalls:sys_enter_epoll_ctl,syscalls:sys_enter_sendmsg,syscalls:sys_enter_recvmsg,syscalls:sys_enter_clock_gettime,syscalls:sys_enter_getsockopt,syscalls:sys_enter_setsockopt,syscalls:sys_enter_ioctl,syscalls:sys_enter_futex,syscalls:sys_enter_mmap,syscalls:sys_enter_munmap,syscalls:sys_enter_madvise,syscalls:sys_enter_brk' \
    -o "$tmp/perf.csv" -- sleep 4
elif [ "$mode" = events ]; then
  # Kernel events per core (0: server, 1: bots), 4 s.
  sleep 1
  perf stat -x, -a -A -C 0,1 -e 'sched:sched_waking,sched:sched_switch,ipi:ipi_send_cpu,irq_vectors:reschedule_entry,irq_vectors:call_function_single_entry,net:net_dev_xmit,skb:consume_skb,skb:kfree_skb,irq:softirq_entry,timer:timer_start,timer:timer_expire_entry,timer:hrtimer_start,sock:sk_data_ready,tcp:tcp_rcv_space_adjust,tcp:tcp_rcvbuf_grow,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_write,syscalls:sys_enter_read' \
    -o "$tmp/perf.csv" -- sleep 4
elif [ "$mode" = xmit ]; then
  # Call graphs of segments sent and wakeups on the server's core, 2 s.
  sleep 1
  perf record -q -g -C 0 -e net:net_dev_xmit,sched:sched_waking,ipi:ipi_send_cpu -o "${PERF_DATA:-perf.data}" -- sleep 2 2>/dev/null
elif [ "$mode" = sizes ]; then
  # Every write's size on the server's core, 1 s (perf script them afterwards).
  sleep 1
  perf record -q -C 0 -e syscalls:sys_exit_write,syscalls:sys_enter_write,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_read -o "${PERF_DATA:-perf.data}" -- sleep 1 2>/dev/null
elif [ "$mode" = probe ]; then
  # TCP segments processed on each core (tcp:tcp_probe, with ports), 1 s.
  sleep 1
  perf record -q -C 0,1 -e tcp:tcp_probe -o "${PERF_DATA:-perf.data}" -- sleep 1 2>/dev/null
  echo "$port" >"${PERF_DATA:-perf.data}.port"
elif [ "$mode" = pingpong ]; then
  # TCP delayed-ACK state of the bots' sockets (/proc/net/tcp: "quick << 1 | pingpong"
  # after rto and ato), mid-run.
  sleep 2
  for k in 1 2 3; do sleep 0.5; python3 - "$port" >>"${PERF_DATA:-perf.data}.pingpong" <<'PY'
import sys, collections
port = int(sys.argv[1]); c = collections.Counter()
for line in list(open("/proc/net/tcp"))[1:]:
    f = line.split()
    if int(f[2].split(":")[1], 16) != port or int(f[1].split(":")[1], 16) == port: continue
    v = int(f[-3]); c[("pingpong" if v & 1 else "-") + " quick=%d" % (v >> 1) + " ato=" + f[-4]] += 1
print(sorted(c.items(), key=lambda x: -x[1])[:8])
PY
  done
elif [ "$mode" = record ]; then
  # Where the server's time goes (kernel included), call graphs, 4 s.
  sleep 1
  perf record -q -g -e cpu-clock -p "$server" -o "${PERF_DATA:-perf.data}" -- sleep 4 2>/dev/null
fi
run_ms=$(sed -n 's/.*running for \([0-9]*\) ms.*/\1/p' "$tmp/bots.err" | head -1)
until grep -q "run over" "$tmp/bots.err" 2>/dev/null; do sleep 0.1; done
s1=$(snap $server)
cp /proc/net/netstat "$tmp/netstat1"
wait $bots || true
python3 - "$tmp/bots.json" "$s0" "$s1" "$(getconf CLK_TCK)" "$target" "$tmp/perf.csv" "$tmp" <<'EOF'
import json, sys, os
rep = json.load(open(sys.argv[1]))
a = [int(x) for x in sys.argv[2].split()]; b = [int(x) for x in sys.argv[3].split()]
d = [y - x for x, y in zip(a, b)]
tck = int(sys.argv[4])
utime, stime, rchar, wchar, syscr, syscw, inseg, outseg, vcs, nvcs, butime, bstime, ns = d
n = rep["deliveriesReceived"]
wall = ns / 1e9
out = dict(target=sys.argv[5], deliveriesPerSec=round(n / (rep["durationMs"] / 1000)),
           kernelUs=round(stime * 1e6 / tck / n, 4), userUs=round(utime * 1e6 / tck / n, 4),
           serverCpuPct=round(100 * (utime + stime) / tck / wall, 1),
           botsUs=round((butime + bstime) * 1e6 / tck / n, 4), botsKernelUs=round(bstime * 1e6 / tck / n, 4),
           botsCpuPct=round(100 * (butime + bstime) / tck / wall, 1),
           deliveriesPerWrite=round(n / syscw, 2) if syscw else None, readsPerDelivery=round(syscr / n, 4),
           bytesPerDelivery=round(wchar / n, 1), segmentsInPerDelivery=round(inseg / n, 4),
           ctxSwitches=(vcs, nvcs), botsFramesPerRead=round(rep.get("framesReceived", 0) / max(1, rep.get("reads", 1)), 2),
           checkFailures=rep["checkFailures"])
p = sys.argv[6]
if os.path.exists(p):
    counts = {}
    for line in open(p):
        f = line.strip().split(",")
        if len(f) > 2 and f[0].replace(".", "").isdigit():
            counts[f[2].split(":")[-1].replace("sys_enter_", "")] = int(float(f[0]))
        elif len(f) > 3 and f[0].startswith("CPU") and f[1].replace(".", "").isdigit():
            counts[f[0] + ":" + f[3].split(":")[-1].replace("sys_enter_", "")] = int(float(f[1]))
    # per 1 000 deliveries, at the deliveries/s of the whole run (the 4 s window is inside it)
    rate = n / (rep["durationMs"] / 1000) * 4
    out["syscallsPer1000"] = {k: round(1000 * v / rate, 2) for k, v in counts.items() if v}
# TcpExt counters that moved, per 1 000 deliveries (namespace-wide).
def netstat(path):
    lines = [l.split() for l in open(path)]
    vals = {}
    for names, nums in zip(lines[0::2], lines[1::2]):
        for k, v in zip(names[1:], nums[1:]):
            vals[names[0] + k] = int(v)
    return vals
n0, n1 = netstat(sys.argv[7] + "/netstat0"), netstat(sys.argv[7] + "/netstat1")
moved = {k.replace("TcpExt:", ""): round(1000 * (n1[k] - n0[k]) / n, 2) for k in n1 if k.startswith("TcpExt:") and n1[k] - n0[k] > n / 10000}
out["tcpExtPer1000"] = moved
print(json.dumps(out))
EOF
