#!/usr/bin/env bash
# Builds the libFuzzer targets of Fuzz/ (nested package, -sanitize=fuzzer,address) and
# runs each for FUZZ_SECONDS (default 60) at low priority, starting from the committed
# seeds in Fuzz/corpus/<target>; what the fuzzers find is kept in .build-fuzz/corpus.
# A crash stops the run with a non-zero status and leaves the input in
# .build-fuzz/artifacts. Usage: scripts/fuzz.sh [target ...]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${FUZZ_SECONDS:-60}"
SCRATCH="$PWD/.build-fuzz"
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(FuzzFrames FuzzHTTPHead FuzzJSON FuzzCommand FuzzJWT FuzzRESP FuzzSnapshot FuzzLogRecord FuzzDataFile)

(cd Fuzz && nice -n 19 swift build -c release --scratch-path "$SCRATCH")
mkdir -p "$SCRATCH/artifacts"
for t in "${TARGETS[@]}"; do
  mkdir -p "$SCRATCH/corpus/$t"
  echo "== $t: ${SECONDS_EACH}s"
  status=0
  nice -n 19 "$SCRATCH/release/$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$SCRATCH/artifacts/$t-" \
    "$SCRATCH/corpus/$t" "Fuzz/corpus/$t" >"$SCRATCH/$t.log" 2>&1 || status=$?
  grep -E "DONE|^stat::number_of_executed_units|ERROR|SUMMARY|Test unit written" "$SCRATCH/$t.log" || true
  if [ "$status" -ne 0 ]; then
    tail -40 "$SCRATCH/$t.log" >&2
    echo "fuzz: $t failed (log: $SCRATCH/$t.log)" >&2
    exit 1
  fi
done
