#!/usr/bin/env bash
# Build the fuzz harnesses with clang and libFuzzer and run each one.
#
#   tests/fuzz/run.sh SECONDS [BUILD_DIR] [HARNESS...]
#
# Each harness runs for SECONDS, one a core side by side (TERN_FUZZ_JOBS
# sets how many), starting from its seed corpus (tests/fuzz/corpus/NAME, only
# read) and the inputs it found in earlier runs (BUILD_DIR/corpus/NAME). A crash, a leak, a hang or a broken
# property stops that harness; its input is saved as BUILD_DIR/crashes/NAME-*
# and the script exits 1 once the others have run. To keep such an input:
# copy it into tests/fuzz/corpus/NAME/ once the bug is fixed.
#
# TERN_FUZZ_SEED=N gives libFuzzer a fixed seed, so that a run from the same
# corpus tries the same inputs in the same order, as far as its time allows
# (fuzz_conn's node runs threads, so its coverage, and from there its path,
# can still differ a little). The test command sets it, so that it checks
# the code, not the luck of the draw. Unset, every run takes a new seed and
# explores further: that is how to look for new bugs.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
if [ $# -lt 1 ] || ! [[ "$1" =~ ^[0-9]+$ ]] || [ "$1" -eq 0 ]; then
  echo "usage: $0 SECONDS [BUILD_DIR] [HARNESS...]" >&2
  exit 2
fi
seconds="$1"
build="${2:-$here/../../build-fuzz}"
shift $(( $# >= 2 ? 2 : 1 ))
harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
  harnesses=(frames handshake reasm keyexpr config conn)
fi

if ! command -v clang >/dev/null; then
  echo "fuzz: clang is missing: run scripts/setup --test (apt-get install clang libclang-rt-14-dev)" >&2
  exit 1
fi

mkdir -p "$build"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$here" -B "$build" -DCMAKE_C_COMPILER=clang >"$build/configure.log" 2>&1 || {
    cat "$build/configure.log" >&2
    echo "fuzz: configuring the clang build failed" >&2
    exit 1
  }
fi
targets=()
for h in "${harnesses[@]}"; do
  if [ ! -f "$here/fuzz_$h.c" ]; then
    echo "fuzz: no harness '$h' (tests/fuzz/fuzz_$h.c)" >&2
    exit 2
  fi
  targets+=("fuzz_$h")
done
if ! cmake --build "$build" -j2 --target "${targets[@]}" >"$build/build.log" 2>&1; then
  cat "$build/build.log" >&2
  echo "fuzz: building the harnesses failed (is libclang-rt-14-dev installed?)" >&2
  exit 1
fi

# fuzz_one NAME: run one harness; its summary goes to BUILD/fuzz_NAME.result,
# its exit status to BUILD/fuzz_NAME.rc.
fuzz_one() {
  local h=$1 log="$build/fuzz_$1.log" opts=() rc runs cov found
  [ -f "$here/$h.dict" ] && opts=("-dict=$here/$h.dict")
  [ -n "${TERN_FUZZ_SEED:-}" ] && opts+=("-seed=$TERN_FUZZ_SEED")
  set +e
  # The first directory receives new inputs; the seeds are only read.
  "$build/fuzz_$h" "${opts[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=16384 -print_final_stats=1 -artifact_prefix="$build/crashes/$h-" \
    "$build/corpus/$h" "$here/corpus/$h" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1 || true)
  found=$(find "$build/corpus/$h" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then
    printf 'fuzz_%s: %s executions in %s s, %s, %s inputs in %s\n' \
      "$h" "${runs:-?}" "$seconds" "${cov:-cov: ?}" "$found" "$build/corpus/$h"
  else
    printf 'fuzz_%s: FAILED after %s executions (exit %d); log: %s\n' "$h" "${runs:-?}" "$rc" "$log"
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*property broken|artifact_prefix|Test unit written)' "$log" | head -n 8 || true
  fi >"$build/fuzz_$h.result"
  echo "$rc" >"$build/fuzz_$h.rc"
}

# Each harness is one process on one core: TERN_FUZZ_JOBS of them (default:
# one a core) run side by side, each still for SECONDS.
jobs=${TERN_FUZZ_JOBS:-$(nproc)}
mkdir -p "$build/crashes"
running=0
for h in "${harnesses[@]}"; do
  mkdir -p "$build/corpus/$h"
  rm -f "$build/fuzz_$h.rc" "$build/fuzz_$h.result"
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$h" &
  running=$((running + 1))
done
wait || true

failed=0
for h in "${harnesses[@]}"; do
  cat "$build/fuzz_$h.result" 2>/dev/null || echo "fuzz_$h: no result (the script running it died)"
  [ "$(cat "$build/fuzz_$h.rc" 2>/dev/null)" = 0 ] || failed=1
done
exit "$failed"
