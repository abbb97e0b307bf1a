#!/usr/bin/env bash
# Builds a frozen release snapshot for benchmarking, away from a tree that others are editing
# and rebuilding: the working tree as it is now (default; tracked and untracked files, minus
# ignored ones) or a commit (git archive COMMIT, plus the working tree's benchmarks/, whose
# tools may not be committed yet). Configured Release without tests into build/snap-<id>/bin;
# writes bin/COMMIT, which lib.sh puts into the results.
#
#   benchmarks/scenarios/build_snapshot.sh            # the working tree
#   benchmarks/scenarios/build_snapshot.sh 4771bca    # a commit
#   BENCH_BIN_DIR=build/snap-<id>/bin benchmarks/scenarios/plaintext.sh
#
# EXTRA_CXXFLAGS (default empty) is passed as CMAKE_CXX_FLAGS and recorded in COMMIT.
# SNAPSHOT_FIXUP (default empty): a shell command run in the snapshot's source directory before
# configuring (to get past a build break in the shared tree); recorded in COMMIT.
set -euo pipefail
cd "$(dirname "$0")/../.."

what=${1:-worktree}
head=$(git rev-parse --short HEAD)
if [[ $what == worktree ]]; then
    id="$head-wt$(date -u +%H%M%S)"
    info="$head + working tree at $(date -u +%Y-%m-%dT%H:%M:%SZ) ($(git status --porcelain | wc -l) changed/untracked paths)"
else
    id=$(git rev-parse --short "$what")
    info="$id (git archive)"
fi
src="build/snap-$id-src"
out="build/snap-$id"
rm -rf "$src"
mkdir -p "$src"
if [[ $what == worktree ]]; then
    git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$src" 2>/dev/null || true
else
    git archive "$id" | tar -x -C "$src"
    rm -rf "$src/benchmarks"
    mkdir -p "$src/benchmarks"
    cp -r benchmarks/CMakeLists.txt benchmarks/micro benchmarks/tools "$src/benchmarks/"
fi
if [[ -n ${SNAPSHOT_FIXUP:-} ]]; then
    (cd "$src" && bash -c "$SNAPSHOT_FIXUP")
    info+=", fixup: $SNAPSHOT_FIXUP"
fi
cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_TESTS=OFF \
    -DCMAKE_CXX_FLAGS="${EXTRA_CXXFLAGS:-}" >/dev/null
timeout 1800 cmake --build "$out" -j "$(nproc)"
[[ -n ${EXTRA_CXXFLAGS:-} ]] && info+=", CXXFLAGS=$EXTRA_CXXFLAGS"
echo "$info, Release" >"$out/bin/COMMIT"
echo "built $out/bin: $(cat "$out/bin/COMMIT")"
