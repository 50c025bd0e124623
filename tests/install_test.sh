#!/usr/bin/env bash
# cmake --install puts libtern, tern/tern.h and tern.pc in a prefix, and a
# program builds against them with nothing but pkg-config. The installed tern
# finds its helper tern-bench in the prefix it was installed to, and does not
# itself load the libraries only the helpers need. An installed tern bench
# knows the commit it was built from and stores it with each run.
set -euo pipefail
build=$1; src=$2; cflags=${3:-}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(find "$prefix" -name tern.pc | head -1)
test -n "$pc" || { echo "tern.pc was not installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
# shellcheck disable=SC2046
cc $cflags -o "$prefix/sub" "$src/examples/subscriber.c" $(pkg-config --cflags --libs tern)
out=$(LD_LIBRARY_PATH="$prefix/lib:$(dirname "$pc")/.." "$prefix/sub" --listen "unix://$prefix/s.sock" --count 0 'k' 2>&1)
echo "$out"
grep -q "listening on unix://$prefix/s.sock" <<<"$out"
echo "installed library builds and runs"
tern=$(find "$prefix" -type f -path '*/bin/tern' | head -1)
test -n "$tern" || { echo "tern was not installed"; exit 1; }
if find "$prefix" -path '*/bin/tern-*' | grep .; then
	echo "the helpers belong in libexec/tern, not beside tern"
	exit 1
fi
help=$("$tern" bench --help) || { echo "installed 'tern bench --help' failed"; exit 1; }
grep -q '^usage: tern bench' <<<"$help" || { echo "installed 'tern bench --help': $help"; exit 1; }
# (libssl and libcrypto are libtern's own since tls:// endpoints: tern needs them)
if ldd "$tern" | grep -E 'libwebsockets|libsqlite3'; then
	echo "tern links a library that only tern bench or tern dashboard needs"
	exit 1
fi
echo "installed tern runs tern bench from its prefix"
# The commit comes from the build, not from a source tree at run time. (The
# tree may have moved on since the build, so the test asks for a commit id,
# not for the current one.)
want='[0-9a-f]{12}(-dirty)?'
git -C "$src" rev-parse HEAD >/dev/null 2>&1 || want=unknown
(cd "$prefix" && "$tern" bench --scenarios stream --links loopback --layers tcp --modes batched \
	--records 1 --duration 0.05 --db "$prefix/b.db" >/dev/null 2>&1) ||
	{ echo "installed tern bench could not run one cell"; exit 1; }
run=$("$tern" bench export latest --out - --db "$prefix/b.db")
commit=$(grep -oE '"tern_commit":[[:space:]]*"[^"]*"' <<<"$run" | sed 's/.*"\([^"]*\)"$/\1/')
grep -qxE "$want" <<<"$commit" ||
	{ echo "installed tern bench stored commit '$commit', expected $want"; exit 1; }
echo "installed tern bench stores commit $commit"
