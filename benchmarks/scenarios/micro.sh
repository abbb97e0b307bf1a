#!/usr/bin/env bash
# The microbenchmarks (benchmarks/micro/, Google Benchmark) with repetitions, kept as JSON and
# summarised as a markdown table of medians: benchmarks/results/micro-<UTC timestamp>.{json,md}.
#
#   benchmarks/scenarios/micro.sh                       # all, 5 repetitions
#   REPETITIONS=3 FILTER='path|parse' benchmarks/scenarios/micro.sh
#
# Environment (defaults): REPETITIONS (5), FILTER (all), MIN_TIME (0.5 s per repetition),
# BENCH_BIN_DIR (build/release/bin). Single-threaded figures are per core; the machine is shared,
# so compare medians of one run with each other rather than across days.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${BENCH_BIN_DIR:-build/release/bin}/sluice-micro
[[ -x $bin ]] || { echo "micro: no $bin (run scripts/build release)" >&2; exit 1; }
results=${RESULTS_DIR:-benchmarks/results}
mkdir -p "$results"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out="$results/micro-$stamp"
# Bounded: ~70 benchmarks × repetitions × MIN_TIME, plus setup, well under 20 minutes.
timeout 1200 "$bin" --benchmark_filter="${FILTER:-.}" --benchmark_repetitions="${REPETITIONS:-5}" \
    --benchmark_min_time="${MIN_TIME:-0.5}" --benchmark_out="$out.json" --benchmark_out_format=json \
    --benchmark_display_aggregates_only=true >&2
python3 benchmarks/scenarios/micro_report.py "$out.json" "$bin --benchmark_repetitions=${REPETITIONS:-5} --benchmark_min_time=${MIN_TIME:-0.5}" >"$out.md"
cat "$out.md"
echo "micro: $out.json, $out.md" >&2
