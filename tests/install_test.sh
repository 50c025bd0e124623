#!/usr/bin/env bash
# cmake --install puts libtern, tern/tern.h and tern.pc in a prefix, and a
# program builds against them with nothing but pkg-config.
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
