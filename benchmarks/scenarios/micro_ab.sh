#!/usr/bin/env bash
# An A/B of two builds of the microbenchmarks on a shared, noisy machine: the two binaries run
# alternately, one repetition each, PAIRS times, on one pinned core, and each benchmark's figure
# is the median of the paired ratios B/A (a slow spell of the host hits both runs of a pair
# alike). Writes benchmarks/results/micro_ab-<UTC timestamp>/ (every run's JSON) and .md.
#
#   git worktree add /tmp/base <commit> && (cd /tmp/base && scripts/build release)
#   A_BIN=/tmp/base/build/release/bin/sluice-micro FILTER='parse|path' benchmarks/scenarios/micro_ab.sh
#
# Environment (defaults): A_BIN (required: the baseline), B_BIN (build/release/bin/sluice-micro),
# FILTER (all), PAIRS (12), MIN_TIME (0.3 s), CPU (1: the core both run on).
set -euo pipefail
cd "$(dirname "$0")/../.."
a=${A_BIN:?A_BIN must name the baseline sluice-micro}
b=${B_BIN:-build/release/bin/sluice-micro}
for bin in "$a" "$b"; do
    [[ -x $bin ]] || { echo "micro_ab: no $bin" >&2; exit 1; }
done
pairs=${PAIRS:-12}
[[ $pairs =~ ^[1-9][0-9]?$ ]] || { echo "micro_ab: PAIRS must be 1..99, got '$pairs'" >&2; exit 1; }
results=${RESULTS_DIR:-benchmarks/results}
out="$results/micro_ab-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
run() { # which pair
    # Bounded: each benchmark runs about MIN_TIME; a hung binary is cut after 10 minutes.
    timeout 600 taskset -c "${CPU:-1}" "$2" --benchmark_filter="${FILTER:-.}" --benchmark_min_time="${MIN_TIME:-0.3}" \
        --benchmark_out="$out/$1-$3.json" --benchmark_out_format=json >/dev/null
}
for i in $(seq 1 "$pairs"); do
    run a "$a" "$i"
    run b "$b" "$i"
    echo "micro_ab: pair $i of $pairs" >&2
done
python3 benchmarks/scenarios/micro_ab_report.py "$out" "A_BIN=$a B_BIN=$b FILTER='${FILTER:-.}' PAIRS=$pairs" \
    >"$out.md"
cat "$out.md"
echo "micro_ab: $out/, $out.md" >&2
