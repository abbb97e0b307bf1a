#!/usr/bin/env bash
# sluice-load against wrk on the same endpoint: do the two load generators agree?
# sluice-hello (epoll, 1 I/O thread) serves; each case runs wrk -t1 and sluice-load (one loop
# thread) alternately, RUNS times, DURATION s each, and the report gives the median req/s and
# p99 of each and their ratio (goal: req/s within 5%, p99 consistent).
#
#   benchmarks/scenarios/load_vs_wrk.sh
#
# Cases (CASES, "name:connections:path"):
#   delay10   100 connections, GET /delay?ms=10   (server-paced: the model is 10,000 req/s)
#   delay100  1,000 connections, GET /delay?ms=100 (10,000 req/s; 1,000 fds each side)
#   plaintext 64 connections, GET /               (generator-bound on 2 CPUs: it measures the
#             faster generator, not agreement; shown for the record)
# Both count every response completed within DURATION (wrk's Requests/sec; sluice-load's
# throughput over the whole run); both latencies are per request from send to the last byte.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${RUNS:-3}
DURATION=${DURATION:-8}
CASES=${CASES:-"delay10:100:/delay?ms=10 delay100:1000:/delay?ms=100 plaintext:64:/"}

run_wrk() {
    local name=$1 conns=$2 url=$3 run=$4 out="$BENCH_TMP/wrk-$1-$4.txt"
    bench_wrk "$out" "$DURATION" -t1 -c"$conns" -d"${DURATION}s" --timeout 10s --latency "$url"
    bench_row "case=str:$name" "tool=str:wrk" "conns=$conns" "run=$run" @"$out.json"
    bench_say "$name run $run wrk: $(bench_json "$out.json" rps) req/s, p99 $(bench_json "$out.json" p99_ms) ms"
}

run_load() {
    local name=$1 conns=$2 url=$3 run=$4 out="$BENCH_TMP/load-$1-$4.json"
    local cmd=("$BIN_DIR/sluice-load" --users "$conns" --duration "$DURATION" --timeout 10 --json --no-progress "$url")
    bench_log_cmd "${cmd[*]}"
    timeout --kill-after=5 $((DURATION + 60)) "${cmd[@]}" >"$out" 2>"$out.err" || true
    # The same keys as wrk's row: rps, p50/p90/p99, errors, requests.
    python3 -c '
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(json.dumps({"rps": d["throughput"], "p50_ms": d["p50_ms"], "p90_ms": d["p90_ms"], "p99_ms": d["p99_ms"],
                  "lat_avg_ms": d["avg_ms"], "lat_max_ms": d["max_ms"], "errors": d["errors"],
                  "requests": d["samples"], "window_rps": d["window_throughput"]}))' "$out" >"$out.row" ||
        echo '{}' >"$out.row"
    bench_row "case=str:$name" "tool=str:sluice-load" "conns=$conns" "run=$run" @"$out.row"
    bench_say "$name run $run sluice-load: $(bench_json "$out.row" rps) req/s, p99 $(bench_json "$out.row" p99_ms) ms"
}

main() {
    bench_init load_vs_wrk
    [[ -x $BIN_DIR/sluice-load ]] || bench_die "sluice-load not built in $BIN_DIR"
    for k in RUNS DURATION CASES; do bench_param "$k" "${!k}"; done
    local port
    port=$(bench_free_port)
    bench_start_sluice "$BENCH_TMP/hello.log" "$port" --backend epoll --io-threads 1 --set log_level=warn \
        --set limits.max_connections=20000 || bench_die "sluice-hello did not start: $SERVER_ERROR"
    local spec name conns path run
    for spec in $CASES; do
        IFS=: read -r name conns path <<<"$spec"
        for ((run = 1; run <= RUNS; run++)); do
            # Alternating, so a change in the machine's load hits both tools alike.
            run_wrk "$name" "$conns" "http://127.0.0.1:$port$path" "$run"
            run_load "$name" "$conns" "http://127.0.0.1:$port$path" "$run"
        done
    done
    bench_note "Agreement goal (issue 8): sluice-load's req/s within 5% of wrk's, p99 consistent, on a" \
        "server-paced endpoint. plaintext is generator-bound on this 2-CPU host (server and generator share it)."
    bench_report load_vs_wrk
}

main "$@"
