# Helpers shared by the hardening tests, on top of tests/node/lib.sh
# (start, stop, finish, wait_for, bound, summary_field, fail).
# Usage: set TERN, then source this file.

. "$(dirname "${BASH_SOURCE[0]}")/../node/lib.sh"

SKIP=77

# skip REASON: the test cannot run here; ctest shows it as skipped.
skip() {
	echo "SKIPPED: $*"
	exit "$SKIP"
}

# rss_kb PID: resident set size in KiB (0 once the process is gone).
rss_kb() {
	awk '/^VmRSS:/ { print $2; found = 1 } END { if (!found) print 0 }' "/proc/$1/status" 2>/dev/null || echo 0
}

# fd_count PID: open file descriptors.
fd_count() {
	ls "/proc/$1/fd" 2>/dev/null | wc -l
}

# now_s: seconds with fractions, monotonic enough for intervals in a test.
now_s() {
	date +%s.%N
}

# elapsed FROM [TO]: seconds between two now_s values, 2 decimals.
elapsed() {
	awk -v a="${2:-$(now_s)}" -v b="$1" 'BEGIN { printf "%.2f", a - b }'
}

# le A B: true when the number A <= B.
le() {
	awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'
}

# lines NAME: how many lines NAME printed on stdout so far.
lines() {
	if [ -f "$TMP/$1.out" ]; then
		wc -l <"$TMP/$1.out"
	else
		echo 0
	fi
}

# wait_lines NAME COUNT SECONDS
wait_lines() {
	local end=$((SECONDS + $3))
	while [ "$(lines "$1")" -lt "$2" ]; do
		[ $SECONDS -le $end ] || fail "$1 got $(lines "$1") lines in $3 s, expected $2"
		sleep 0.05
	done
}

# sanitizer_build BINARY: true when BINARY runs under ASan or TSan. Their
# allocators hold on to freed memory (ASan's quarantine, TSan's shadow and
# access history), so the process's RSS says nothing about a leak there.
sanitizer_build() {
	nm -an "$1" 2>/dev/null | grep -Eq '__(asan|tsan)_init' ||
		ldd "$1" 2>/dev/null | grep -Eq 'lib(asan|tsan)'
}

# tsan_build BINARY: true when BINARY runs under ThreadSanitizer, which makes
# every message cost 5 to 15 times the CPU. A rate that stands for "the link
# is full" or "the node kept up" then measures the sanitizer (and, on a
# shared machine, the load) rather than the node: such rates are reported,
# not judged, there. Delivery, order and deadlines are still checked.
tsan_build() {
	nm -an "$1" 2>/dev/null | grep -q '__tsan_init' || ldd "$1" 2>/dev/null | grep -q libtsan
}

# no_sanitizer_report FILE...: fail when a sanitizer or a crash wrote there.
no_sanitizer_report() {
	local f
	for f in "$@"; do
		[ -f "$f" ] || continue
		if grep -Eq 'AddressSanitizer|LeakSanitizer|ThreadSanitizer|runtime error:|Segmentation fault|Aborted' "$f"; then
			fail "$(basename "$f") has a sanitizer report or crash: $(grep -Em 3 'Sanitizer|runtime error|fault|Aborted' "$f")"
		fi
	done
}

# Checks that go on after a failure, so that one run reports every problem
# and every measurement: bad MESSAGE counts a failure; verdict ends the test.
failed=0
bad() {
	echo "FAIL: $*"
	failed=$((failed + 1))
}

# verdict PASSED_COUNT: print the closing line, exit 1 after any failure.
verdict() {
	local f
	if [ "$failed" -gt 0 ]; then
		for f in "$TMP"/*.err "$TMP"/*.log; do
			[ -f "$f" ] || continue
			echo "---- $(basename "$f") (last 15 lines)"
			tail -n 15 "$f"
		done
		echo "$1 passed, $failed failed"
		exit 1
	fi
	echo "$1 passed, 0 failed"
	exit 0
}

# wait_status NAME VAR: wait for NAME and store its exit status in VAR
# (not in a $(...): a subshell cannot wait for the script's children).
wait_status() {
	local ws_pid="${1}_pid" ws_rc=0
	wait "${!ws_pid}" || ws_rc=$?
	printf -v "$2" '%s' "$ws_rc"
}
