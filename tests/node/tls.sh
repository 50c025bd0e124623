#!/usr/bin/env bash
# tls:// endpoints, with certificates made here by scripts/make-certs.
#   router N      pub -> router -> sub, mutual TLS: N messages once each, in
#                 order; each side's identity (its certificate's common name)
#                 in the router's log, its stats and its telemetry
#   router_lowlat N   the same in low-latency mode (publishers write the
#                 TLS records themselves, beside the I/O thread's reads)
#   plain_to_tls  a plain peer on a TLS port   } each refused at once, with
#   tls_to_plain  a TLS peer on a plain port   } one line on each side that
#   expired       an expired certificate       } says which; the refused
#   unknown       a certificate of no known CA } client gives up after its
#   wrong_ca      the client trusts another CA } --wait, never hangs
#   silent        a listener that never answers: the TLS client gives up at
#                 handshake_timeout_ms; a silent client on a TLS port is
#                 dropped at the router's
#   acl_identity  an access rule names a certificate's common name: `sub`
#                 may read secret/**, the same subscription made with pub's
#                 certificate is refused (whatever --id it claims)
#   bad_files     a missing, mismatched or non-PEM file is named by
#                 `tern node --check` and stops a node
# Usage: tls.sh TERN MAKE_CERTS CASE [N]
TERN=$1
MAKE_CERTS=$2
CASE=$3
N=${4:-100000}
. "$(dirname "$0")/lib.sh"

command -v openssl >/dev/null || { echo "SKIP: no openssl command (scripts/setup installs it)"; exit 77; }
C="$TMP/certs"
"$MAKE_CERTS" "$C" router pub sub >/dev/null || fail "make-certs failed"

# conf NAME CERT [CA]: a config file NAME.json with CERT's files and CA
conf() {
	local ca=${3:-ca}
	printf '{"tls": {"cert": "%s/%s.pem", "key": "%s/%s.key", "ca": "%s/%s.pem"}}\n' \
		"$C" "$2" "$C" "$2" "$C" "$ca" >"$TMP/$1.json"
}
conf router router
conf pub pub
conf sub sub
if [ "$CASE" = acl_identity ]; then
	printf '{"tls": {"cert": "%s/router.pem", "key": "%s/router.key", "ca": "%s/ca.pem"},
 "acl": [{"peer": "sub", "allow_sub": ["secret/**"]},
         {"peer": "*", "allow_pub": ["**"], "allow_sub": ["sensors/**"]}]}\n' \
		"$C" "$C" "$C" >"$TMP/router.json"
fi

# refused HOW EXPECT_CLIENT EXPECT_ROUTER pub-args...: the publisher cannot
# connect; it says EXPECT_CLIENT, the router's log says EXPECT_ROUTER
refused() {
	local client_re=$1 router_re=$2
	shift 2
	start pub 30 pub t/x --data x --count 1 --wait 3 --id client "$@"
	finish pub 1
	grep -Eq -- "$client_re" "$TMP/pub.err" || fail "the client did not say: $client_re"
	wait_for "$TMP/r.err" "$router_re" 10 || fail "the router did not say: $router_re"
	echo "ok client: $(grep -E -- "$client_re" "$TMP/pub.err" | head -n 1)"
	echo "ok router: $(grep -E -- "$router_re" "$TMP/r.err" | head -n 1 | sed 's/^[^ ]* //')"
	# one line a cause on the client: the dialer's, not one a retry
	[ "$(grep -c . "$TMP/pub.err")" -le 2 ] || fail "the client logged more than its reason: $(cat "$TMP/pub.err")"
}

start r 120 node --mode router -c "$TMP/router.json" --id router \
	--listen tls://127.0.0.1:0 --listen tcp://127.0.0.1:0
wait_for "$TMP/r.err" 'listening on tcp://' 10 || fail "router did not listen"
tls_ep=$(grep -Eo 'listening on tls://[^ ]+' "$TMP/r.err" | sed 's/^listening on //')
tcp_ep=$(grep -Eo 'listening on tcp://[^ ]+' "$TMP/r.err" | sed 's/^listening on //')

LL=()
[ "$CASE" = router_lowlat ] && LL=(--low-latency)
case "$CASE" in
router | router_lowlat)
	seq 1 "$N" >"$TMP/input"
	expected_lines t/seq "$N" >"$TMP/expected"
	start sub 100 sub 't/**' -c "$TMP/sub.json" --id sub --connect "$tls_ep" "${LL[@]}"
	wait_for "$TMP/r.err" "connected from sub .*TLS identity 'sub'" 15 ||
		fail "the router did not log the subscriber's identity"
	start_stdin pub 100 "$TMP/input" pub t/seq -c "$TMP/pub.json" --id pub --connect "$tls_ep" --wait 10 "${LL[@]}"
	finish pub 0
	grep -Eq "^messages=$N " "$TMP/pub.err" || fail "pub summary: $(cat "$TMP/pub.err")"
	grep -q "connected from pub .*TLS identity 'pub'" "$TMP/r.err" ||
		fail "the router did not log the publisher's identity"
	# bounded: fail once the count stops growing for 10 s
	got=0 last=-1 still=0
	while :; do
		got=$(wc -l <"$TMP/sub.out")
		[ "$got" -lt "$N" ] || break
		if [ "$got" -eq "$last" ]; then
			still=$((still + 1))
			[ "$still" -lt 100 ] || fail "sub got $got of $N messages"
		else
			still=0
			last=$got
		fi
		sleep 0.1
	done
	# the router's stats and telemetry name its peers by their certificates
	kill -USR1 "$(tern_pid r)"
	wait_for "$TMP/r.err" '"identity":"sub"' 10 || fail "no \"identity\":\"sub\" in the router's stats"
	start tel 30 sub '@tern/router/stats' -c "$TMP/sub.json" --id tel --connect "$tls_ep" --count 1
	finish tel 0
	grep -q '"identity":"sub"' "$TMP/tel.out" || fail "no \"identity\":\"sub\" in the router's telemetry: $(cat "$TMP/tel.out")"
	stop sub
	cmp -s "$TMP/expected" "$TMP/sub.out" ||
		fail "sub: output differs from 1..$N in order ($(cmp "$TMP/expected" "$TMP/sub.out" 2>&1 | head -n 1))"
	[ "$(summary_field sub missed)" = 0 ] || fail "sub missed $(summary_field sub missed)"
	echo "ok $N messages over tls:// through the router ${LL[*]}, once each, in order; identities in log, stats and telemetry"
	;;
plain_to_tls)
	refused 'speaks TLS \(connect with tls://\)' 'a plain tern peer on a TLS port' \
		--connect "tcp://${tls_ep#tls://}"
	;;
tls_to_plain)
	refused 'is a plain tern node, not TLS \(connect with tcp://\)' 'a TLS peer on the plain port' \
		-c "$TMP/pub.json" --connect "tls://${tcp_ep#tcp://}"
	;;
expired)
	"$MAKE_CERTS" --expired "$C" old >/dev/null || fail "make-certs --expired failed"
	conf old old
	refused 'alert certificate expired' "refused the peer's certificate: certificate has expired" \
		-c "$TMP/old.json" --connect "$tls_ep"
	;;
unknown)
	"$MAKE_CERTS" --self-signed "$C" stranger >/dev/null || fail "make-certs --self-signed failed"
	conf stranger stranger
	refused 'alert unknown ca' "refused the peer's certificate: self-signed certificate" \
		-c "$TMP/stranger.json" --connect "$tls_ep"
	;;
wrong_ca)
	"$MAKE_CERTS" --ca other "$C" foreign >/dev/null || fail "make-certs --ca failed"
	conf foreign foreign other
	refused "refused the peer's certificate" 'the peer refused the handshake \(tlsv1 alert unknown ca\)' \
		-c "$TMP/foreign.json" --connect "$tls_ep"
	;;
silent)
	# a listener that accepts and never answers: the TLS client gives up at
	# handshake_timeout_ms and retries, never hangs; and a peer that connects
	# to the TLS port and says nothing is dropped at the same deadline
	command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
	python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
held = []
end = time.time() + 60
while time.time() < end:
    s.settimeout(1)
    try:
        held.append(s.accept()[0])
    except OSError:
        pass
' >"$TMP/mute.out" &
	PIDS+=("$!")
	wait_for "$TMP/mute.out" '^[0-9]+$' 10 || fail "the mute listener did not start"
	printf '{"handshake_timeout_ms": 500, "tls": {"cert": "%s/pub.pem", "key": "%s/pub.key", "ca": "%s/ca.pem"}}\n' \
		"$C" "$C" "$C" >"$TMP/hurry.json"
	start pub 30 pub t/x --data x --count 1 --wait 3 --id client -c "$TMP/hurry.json" \
		--connect "tls://127.0.0.1:$(head -n 1 "$TMP/mute.out")"
	finish pub 1
	grep -q 'no handshake before the deadline' "$TMP/pub.err" || fail "the client did not give up on the silent peer: $(cat "$TMP/pub.err")"
	echo "ok client: $(head -n 1 "$TMP/pub.err")"
	stop r
	start r 60 node --mode router -c "$TMP/router.json" --id router --log debug \
		--listen tls://127.0.0.1:0 --listen tcp://127.0.0.1:0
	wait_for "$TMP/r.err" 'listening on tls://' 10 || fail "router did not listen"
	tls_ep=$(grep -Eo 'listening on tls://[^ ]+' "$TMP/r.err" | sed 's/^listening on //')
	exec 7<>"/dev/tcp/127.0.0.1/${tls_ep##*:}" || fail "cannot connect to $tls_ep"
	# the router's deadline is its handshake_timeout_ms (5 s by default)
	wait_for "$TMP/r.err" "closed: no handshake before the deadline" 20 ||
		fail "the router kept a silent connection"
	exec 7>&-
	echo "ok router: $(grep -o 'connection .*closed: no handshake before the deadline' "$TMP/r.err" | head -n 1)"
	;;
acl_identity)
	# pub's certificate, claiming the id `sub`: refused, by its proven name
	start spy 30 sub 'secret/**' -c "$TMP/pub.json" --id sub --connect "$tls_ep" --timeout 20
	finish spy 1
	grep -q "access denied: subscribe to 'secret/\*\*' by sub (identity pub) at router" "$TMP/spy.err" ||
		fail "the impostor was not refused: $(cat "$TMP/spy.err")"
	echo "ok $(grep -o 'access denied.*' "$TMP/spy.err" | head -n 1)"
	# sub's certificate: allowed; publish until its first message arrives
	start reader 60 sub 'secret/**' -c "$TMP/sub.json" --id reader --connect "$tls_ep" --count 1 --timeout 40
	wait_for "$TMP/r.err" "connected from reader .*TLS identity 'sub'" 15 ||
		fail "the router did not log the reader's identity"
	for _ in $(seq 1 40); do
		[ -s "$TMP/reader.out" ] && break
		timeout -k 5 30 "$TERN" pub secret/x --data classified --count 1 --wait 5 -c "$TMP/pub.json" \
			--connect "$tls_ep" 2>>"$TMP/pubs.err" || fail "tern pub: $(tail -n 3 "$TMP/pubs.err")"
		sleep 0.25
	done
	finish reader 0
	grep -q 'classified' "$TMP/reader.out" || fail "the reader got nothing: $(cat "$TMP/reader.err")"
	echo "ok the identity the rule names reads secret/**"
	;;
bad_files)
	# every bad TLS setting is named by `tern node --check` and stops a node
	check() {
		printf '%s\n' "$1" >"$TMP/bad.json"
		start chk 20 node -c "$TMP/bad.json" --check
		finish chk 2
		grep -Eq -- "$2" "$TMP/chk.err" || fail "--check did not say: $2 ($(cat "$TMP/chk.err"))"
		start run 20 node -c "$TMP/bad.json" --listen tcp://127.0.0.1:0
		finish run 2
		grep -Eq -- "$2" "$TMP/run.err" || fail "the node did not say: $2 ($(cat "$TMP/run.err"))"
		echo "ok $(head -n 1 "$TMP/chk.err")"
	}
	check "{\"tls\": {\"cert\": \"$C/none.pem\", \"key\": \"$C/pub.key\"}}" "tls.cert '$C/none.pem': No such file"
	check "{\"tls\": {\"cert\": \"$C/pub.pem\", \"key\": \"$C/sub.key\"}}" "tls.key '$C/sub.key': does not match tls.cert"
	check "{\"tls\": {\"cert\": \"$C/pub.key\", \"key\": \"$C/pub.key\"}}" "tls.cert '$C/pub.key': not a PEM certificate"
	check "{\"tls\": {\"ca\": \"$C/pub.key\"}}" "tls.ca '$C/pub.key': holds no PEM certificate"
	# a TLS listener needs a certificate
	start nocert 20 node --listen tls://127.0.0.1:0
	finish nocert 2
	grep -q 'a TLS listener needs tls.cert and tls.key' "$TMP/nocert.err" || fail "no word on the listener's missing certificate: $(cat "$TMP/nocert.err")"
	echo "ok $(grep -o 'cannot listen.*' "$TMP/nocert.err" | head -n 1)"
	;;
*)
	fail "unknown case $CASE"
	;;
esac
stop r
echo "1 passed, 0 failed"
