#!/usr/bin/env bash
# The Dockerfile without a container daemon: both stages are Debian 12 slim; the image runs as a
# non-root user; every app the runtime stage copies is built here; and every shared library
# those binaries link (ldd) comes from a package the runtime stage installs, or from the base
# image's libc6 / libstdc++6 / libgcc-s1 (dpkg -S names the package of each library).
# Usage: dockerfile_test.sh <source dir> <bin dir>. Exit 77 (skipped) without ldd or dpkg.
set -euo pipefail
src=$1
bin=$2
file="$src/Dockerfile"
fail() {
    echo "dockerfile_test: $*" >&2
    exit 1
}
if ! command -v ldd >/dev/null || ! command -v dpkg >/dev/null; then
    echo "dockerfile_test: ldd or dpkg missing: skipped"
    exit 77
fi

mapfile -t froms < <(awk 'toupper($1) == "FROM" { print $2 }' "$file")
((${#froms[@]} == 2)) || fail "expected two stages, got: ${froms[*]}"
for f in "${froms[@]}"; do
    [[ $f == debian:12-slim ]] || fail "a stage is FROM $f, not debian:12-slim"
done
user=$(awk 'toupper($1) == "USER" { u = $2 } END { print u }' "$file")
[[ -n $user && ${user%%:*} != root && ${user%%:*} != 0 ]] || fail "the image runs as '${user:-root}'"

# The runtime stage's packages: the apt-get install line after the "runtime-packages" comment.
runtime=$(awk '/^# runtime-packages/ { on = 1 } on && /apt-get install/ { sub(/.*--no-install-recommends/, ""); sub(/\\/, ""); print; exit }' "$file")
[[ -n $runtime ]] || fail "no runtime-packages apt-get install line"
allowed=" $runtime libc6 libstdc++6 libgcc-s1 "

# The binaries the runtime stage copies from the build stage.
mapfile -t apps < <(grep -o '/src/build/release/bin/[a-z-]*' "$file" | xargs -n 1 basename | sort -u)
((${#apps[@]} > 0)) || fail "the runtime stage copies no binaries"
for app in "${apps[@]}"; do
    [[ -x $bin/$app ]] || fail "$app is copied by the Dockerfile but not built in $bin"
    while read -r lib; do
        pkg=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
        [[ -n $pkg ]] || pkg=$(dpkg -S "$lib" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
        [[ -n $pkg ]] || fail "$app links $lib, which no package owns"
        [[ $allowed == *" $pkg "* ]] || fail "$app links $lib from $pkg, which the runtime stage does not install ($runtime)"
    done < <(ldd "$bin/$app" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }')
done
echo "dockerfile_test: ok: ${apps[*]} need only:$runtime (+ the base image)"
