#!/usr/bin/env bash
# The installed library, used the way another project would: `cmake --install` into a temporary
# prefix, then examples/readme_server configured out of tree with find_package(sluice), built,
# run and asked for /users/42; and the same main.cc compiled with pkg-config's flags alone.
# Usage: install_test.sh <build dir> <source dir>
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d /tmp/sluice_install.XXXXXX)
pid=
cleanup() {
    if [[ -n $pid ]]; then kill -TERM "$pid" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT

timeout 120 cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/sluice/sluice.h"
test -f "$tmp/prefix/lib/libsluice.a"
test -f "$tmp/prefix/lib/cmake/sluice/sluice-config.cmake"
test -f "$tmp/prefix/lib/pkgconfig/sluice.pc"

# Out of tree: nothing from the source tree but the example's own two files.
cp -r "$src/examples/readme_server" "$tmp/example"
timeout 120 cmake -S "$tmp/example" -B "$tmp/example/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
timeout 300 cmake --build "$tmp/example/build" >/dev/null

# Runs a build of the example on a free port, asks it for /users/42, stops it with SIGTERM.
serve_and_check() {
    "$1" --listen 127.0.0.1:0 >"$tmp/server.log" 2>&1 &
    pid=$!
    local port=
    for _ in $(seq 100); do
        port=$(sed -n 's/.*(port \([0-9]*\)).*/\1/p' "$tmp/server.log" | head -1)
        [[ -n $port ]] && break
        sleep 0.05
    done
    [[ -n $port ]] || { echo "$1 did not report its port:"; cat "$tmp/server.log"; exit 1; }
    local body
    body=$(timeout 10 curl -sS "http://127.0.0.1:$port/users/42")
    [[ $body == '{"id":"42"}' ]] || { echo "$1: unexpected body: $body"; exit 1; }
    kill -TERM "$pid"
    timeout 20 tail --pid="$pid" -f /dev/null
    pid=
}
serve_and_check "$tmp/example/build/readme_server"

# pkg-config alone.
flags=$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs sluice)
# shellcheck disable=SC2086 # word splitting of the flags is intended
timeout 300 g++ -O0 -o "$tmp/pc_server" "$tmp/example/main.cc" $flags
serve_and_check "$tmp/pc_server"
echo "install_test: ok"
