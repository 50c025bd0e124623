#!/usr/bin/env bash
# Access rules on a router, seen from the command line: `tern sub` on a key
# expression the router's acl does not allow prints the refusal and exits 1,
# one on an allowed expression gets its messages; `tern pub` on a key it may
# not publish on prints the refusal and exits 1. The router logs each
# refusal with the peer and the key.
TERN=$1
. "$(dirname "$0")/lib.sh"

cat >"$TMP/router.json" <<'JSON'
{
  "id": "acl-router",
  "mode": "router",
  "listen": ["tcp://127.0.0.1:0"],
  "acl": [
    { "peer": "*", "allow_sub": ["sensors/**", "b/**"], "allow_pub": ["sensors/**", "a/**"] },
    { "peer": "auditor", "allow_sub": ["**"] }
  ]
}
JSON
start router 90 node -c "$TMP/router.json"
ep=$(bound router)

# wait_connected N: until the router has logged more than N connections
wait_connected() {
	local end=$((SECONDS + 20))
	while [ "$(grep -c 'connected from' "$TMP/router.err")" -le "$1" ]; do
		[ $SECONDS -le $end ] || fail "no new connection on the router"
		sleep 0.05
	done
}

# refused subscription: exit 1, the reason on stderr, logged on the router
start secret 30 sub 'secret/**' --connect "$ep" --timeout 20
finish secret 1
grep -q "access denied: subscribe to 'secret/\*\*'.* at acl-router" "$TMP/secret.err" ||
	fail "tern sub did not print the refusal: $(cat "$TMP/secret.err")"
wait_for "$TMP/router.err" "warn: acl: refused to let .* subscribe to 'secret/\*\*'" 10 ||
	fail "the router did not log the refused subscription"
echo "ok refused subscription"

# `**` is not narrowed to what is allowed: refused as a whole
start all 30 sub '**' --connect "$ep" --timeout 20
finish all 1
grep -q "access denied: subscribe to '\*\*'" "$TMP/all.err" || fail "tern sub '**': $(cat "$TMP/all.err")"
echo "ok '**' refused"

# allowed subscription: the messages arrive
n=$(grep -c 'connected from' "$TMP/router.err")
start sensors 30 sub 'sensors/**' --connect "$ep" --count 3 --timeout 20
wait_connected "$n"
start pub_sensors 30 pub sensors/t --connect "$ep" --data 21C --count 3 --wait 10
finish pub_sensors 0
finish sensors 0
[ "$(cat "$TMP/sensors.out")" = "$(printf 'sensors/t\t21C\nsensors/t\t21C\nsensors/t\t21C')" ] ||
	fail "sensors subscriber got: $(cat "$TMP/sensors.out")"
echo "ok allowed subscription"

# refused publisher: a subscriber to b/** is allowed, publishing on b/x is not
n=$(grep -c 'connected from' "$TMP/router.err")
start bsub 60 sub 'b/**' --connect "$ep" --timeout 40
wait_connected "$n"
start pub_b 30 pub b/x --connect "$ep" --data nope --count 5 --wait 10
finish pub_b 1
grep -q "access denied: publish on 'b/x'.* at acl-router" "$TMP/pub_b.err" ||
	fail "tern pub did not print the refusal: $(cat "$TMP/pub_b.err")"
wait_for "$TMP/router.err" "warn: acl: refused to let .* publish on 'b/x'" 10 ||
	fail "the router did not log the refused publisher"
echo "ok refused publisher"
stop bsub 0
[ ! -s "$TMP/bsub.out" ] || fail "the b/** subscriber received: $(cat "$TMP/bsub.out")"
echo "ok nothing delivered from the refused publisher"
stop router 0
