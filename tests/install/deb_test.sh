#!/usr/bin/env bash
# The .debs CPack makes from the build tree (cmake/install.cmake): `cpack -G DEB` into a
# temporary directory, then each package's control fields and file list (dpkg-deb), and the
# apps extracted (dpkg-deb -x, not installed) and run: --help answers, and sluice-hello serves.
# Usage: deb_test.sh <build dir>
set -euo pipefail
build=$1
tmp=$(mktemp -d /tmp/sluice_deb.XXXXXX)
pid=
cleanup() {
    if [[ -n $pid ]]; then kill -TERM "$pid" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "deb_test: $*" >&2
    exit 1
}

if ! command -v cpack >/dev/null || ! command -v dpkg-deb >/dev/null; then
    echo "deb_test: cpack or dpkg-deb missing: skipped"
    exit 77
fi
timeout 300 cpack -G DEB -B "$tmp" --config "$build/CPackConfig.cmake" >"$tmp/cpack.log" 2>&1 ||
    fail "cpack failed: $(tail -n 20 "$tmp/cpack.log")"

dev=$(find "$tmp" -maxdepth 1 -name 'libsluice-dev_*.deb' | head -n 1)
apps=$(find "$tmp" -maxdepth 1 -name 'sluice-apps_*.deb' | head -n 1)
[[ -n $dev ]] || fail "no libsluice-dev .deb in: $(ls "$tmp")"
[[ -n $apps ]] || fail "no sluice-apps .deb in: $(ls "$tmp")"

# expect_files DEB PATH...: every PATH (./usr/...) is in the package's file list.
expect_files() {
    local deb=$1 list path
    shift
    list=$(dpkg-deb -c "$deb" | awk '{ print $6 }')
    for path in "$@"; do
        grep -qx "$path" <<<"$list" || fail "$(basename "$deb") lacks $path; it has:"$'\n'"$list"
    done
}
expect_files "$dev" ./usr/include/sluice/sluice.h ./usr/include/sluice/server.h ./usr/lib/libsluice.a \
    ./usr/lib/cmake/sluice/sluice-config.cmake ./usr/lib/cmake/sluice/sluice-config-version.cmake \
    ./usr/lib/cmake/sluice/sluice-targets.cmake ./usr/lib/pkgconfig/sluice.pc
expect_files "$apps" ./usr/bin/sluice-gateway ./usr/bin/sluice-hello ./usr/bin/sluice-slow-backend \
    ./usr/bin/sluice-fastio ./usr/bin/sluice-load
# The library package holds no binaries, the apps package no headers.
! dpkg-deb -c "$dev" | grep -q ' ./usr/bin/' || fail "libsluice-dev ships binaries"
! dpkg-deb -c "$apps" | grep -q ' ./usr/include/' || fail "sluice-apps ships headers"

[[ $(dpkg-deb -f "$dev" Package) == libsluice-dev ]] || fail "libsluice-dev: Package $(dpkg-deb -f "$dev" Package)"
[[ $(dpkg-deb -f "$dev" Depends) == *libfmt-dev* ]] || fail "libsluice-dev: Depends $(dpkg-deb -f "$dev" Depends)"
# dpkg-shlibdeps names the shared libraries the apps link (libfmt, libstdc++, libc).
depends=$(dpkg-deb -f "$apps" Depends)
for lib in libc6 libstdc++6 libfmt9; do
    [[ $depends == *"$lib"* ]] || fail "sluice-apps: Depends lacks $lib: $depends"
done

# The packaged binaries run (extracted, not installed: the test changes nothing on the system).
dpkg-deb -x "$apps" "$tmp/root"
# Whole output first: `| grep -q` may exit before the writer, whose SIGPIPE pipefail would report.
help=$(timeout 10 "$tmp/root/usr/bin/sluice-gateway" --help) || fail "sluice-gateway --help failed"
[[ $help == *--limit-routes* ]] || fail "sluice-gateway --help: $help"
# The log exists before the server starts: the background job opens it only after the fork,
# and a sed that ran first failed the test under set -e.
: >"$tmp/hello.log"
"$tmp/root/usr/bin/sluice-hello" --listen 127.0.0.1:0 >>"$tmp/hello.log" 2>&1 &
pid=$!
port=
for _ in $(seq 100); do
    port=$(sed -n 's/.*(port \([0-9]*\)).*/\1/p' "$tmp/hello.log" | head -n 1)
    [[ -n $port ]] && break
    sleep 0.05
done
[[ -n $port ]] || fail "sluice-hello did not report its port: $(cat "$tmp/hello.log")"
body=$(timeout 10 curl -sS "http://127.0.0.1:$port/")
[[ -n $body ]] || fail "sluice-hello answered nothing"
kill -TERM "$pid"
timeout 20 tail --pid="$pid" -f /dev/null
pid=
echo "deb_test: ok: $(basename "$dev") $(basename "$apps")"
