# Shared helpers for the tests that run the real tern binary.
# Usage: source lib.sh after setting TERN to the binary's path.
# Every process runs under `timeout`, every wait is bounded, and everything
# started is stopped (and the temp dir removed) when the script exits.
# timeout runs with --foreground: without it, a signal sent to timeout also
# goes to its whole process group, so tern gets it twice, and a copy that
# lands during LeakSanitizer's exit check hangs the sanitizer build.

set -u

: "${TERN:?TERN must name the tern binary}"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tern-test.XXXXXX")
PIDS=()

cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	local f
	for f in "$TMP"/*.err "$TMP"/*.log; do
		[ -f "$f" ] || continue
		echo "---- $(basename "$f") (last 30 lines)" >&2
		tail -n 30 "$f" >&2
	done
	exit 1
}

# start NAME SECONDS tern-args...: run tern in the background under a
# timeout; stdout to $TMP/NAME.out, stderr to $TMP/NAME.err. Sets the
# variable NAME_pid (the timeout process; signals sent to it reach tern).
start() {
	local name=$1 secs=$2
	shift 2
	# emptied here, not only by the redirection of the job below, which may
	# run late: a name used again must not show the last run's lines
	: >"$TMP/$name.out"
	: >"$TMP/$name.err"
	timeout --foreground -k 5 "$secs" "$TERN" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
	local pid=$!
	PIDS+=("$pid")
	printf -v "${name}_pid" '%s' "$pid"
}

# start_stdin NAME SECONDS INPUTFILE tern-args...: same, reading INPUTFILE.
start_stdin() {
	local name=$1 secs=$2 input=$3
	shift 3
	: >"$TMP/$name.out"
	: >"$TMP/$name.err"
	timeout --foreground -k 5 "$secs" "$TERN" "$@" <"$input" >"$TMP/$name.out" 2>"$TMP/$name.err" &
	local pid=$!
	PIDS+=("$pid")
	printf -v "${name}_pid" '%s' "$pid"
}

# tern_pid NAME: the pid of tern itself (the child of its timeout). Waits up
# to 5 s for timeout to have started it: on a loaded machine it may not yet.
tern_pid() {
	local tpid pid i
	tpid="${1}_pid"
	for i in $(seq 1 100); do
		pid=$(pgrep -P "${!tpid}" | head -n 1)
		if [ -n "$pid" ]; then
			echo "$pid"
			return 0
		fi
		sleep 0.05
	done
	return 1
}

# wait_for FILE REGEX SECONDS: until a line of FILE matches (grep -E).
wait_for() {
	local file=$1 re=$2 secs=$3
	local end=$((SECONDS + secs))
	while [ $SECONDS -le $end ]; do
		if [ -f "$file" ] && grep -Eq -- "$re" "$file"; then
			return 0
		fi
		sleep 0.05
	done
	return 1
}

# bound NAME: the endpoint NAME printed after "listening on" (waits 10 s).
bound() {
	wait_for "$TMP/$1.err" 'listening on ' 10 || fail "$1 printed no 'listening on' line"
	grep -Eo 'listening on [^ ]+' "$TMP/$1.err" | head -n 1 | sed 's/^listening on //'
}

# finish NAME [EXPECTED_STATUS]: wait for NAME to exit and check its status.
finish() {
	local name=$1 want=${2:-0}
	local tpid="${name}_pid"
	local rc=0
	wait "${!tpid}" || rc=$?
	if [ "$rc" -ne "$want" ]; then
		fail "$name exited with status $rc, expected $want"
	fi
}

# stop NAME [STATUS]: SIGTERM, then check for a clean exit (status STATUS,
# default 0). A process still there after 3 s gets its threads' stacks
# saved (with gdb, when installed) in NAME.log before its timeout kills it.
stop() {
	local tpid="${1}_pid"
	local child
	child=$(pgrep -P "${!tpid}" | head -n 1)
	kill -TERM "${!tpid}" 2>/dev/null || true
	if [ -n "$child" ]; then
		local n=0
		while kill -0 "$child" 2>/dev/null && [ $n -lt 60 ]; do
			sleep 0.05
			n=$((n + 1))
		done
		if kill -0 "$child" 2>/dev/null && command -v gdb >/dev/null 2>&1; then
			echo "$1 (pid $child) still running 3 s after SIGTERM:" >"$TMP/$1.log"
			timeout 10 gdb -p "$child" -batch -ex "thread apply all bt" >>"$TMP/$1.log" 2>&1 || true
		fi
	fi
	finish "$1" "${2:-0}"
}

# summary_field NAME FIELD: a field of the summary line on NAME's stderr.
summary_field() {
	grep -E '^messages=' "$TMP/$1.err" | tail -n 1 | tr ' ' '\n' | grep -E "^$2=" | cut -d= -f2
}

# expected_lines KEY N: what `tern sub` prints for lines 1..N published on KEY.
expected_lines() {
	seq 1 "$2" | sed "s|^|$1	|"
}
