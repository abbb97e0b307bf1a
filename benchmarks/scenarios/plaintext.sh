#!/usr/bin/env bash
# Plaintext throughput: GET / -> "Hello, World!" from nginx and from sluice-hello on each backend,
# loaded by wrk one after another, alternating, RUNS times; reports the median req/s per server
# and its ratio to nginx (absolute figures on a shared machine are noise; the ratio in one run is
# the figure).
#
#   benchmarks/scenarios/plaintext.sh
#   BACKENDS="nginx epoll uring" IO_THREADS=2 CONNS=1000 benchmarks/scenarios/plaintext.sh
#
# Environment (defaults): BACKENDS ("nginx epoll"), IO_THREADS (1; nginx worker_processes follow
# unless NGINX_WORKERS is set), CONNS (256), DURATION (10 s), RUNS (3), WRK_THREADS (1),
# WARMUP (2 s per server, not recorded), URL_PATH (/), SLUICE_ARGS (extra sluice-hello flags).
# Nothing is pinned; nproc, kernel and the exact commands go into the results.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BACKENDS=${BACKENDS:-"nginx epoll"}
IO_THREADS=${IO_THREADS:-1}
NGINX_WORKERS=${NGINX_WORKERS:-$IO_THREADS}
CONNS=${CONNS:-256}
DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
WRK_THREADS=${WRK_THREADS:-1}
WARMUP=${WARMUP:-2}
URL_PATH=${URL_PATH:-/}
SLUICE_ARGS=${SLUICE_ARGS:-}

declare -A PORT=() PID=() MEM=()
ACTIVE=()

start_server() {
    local b=$1 port
    port=$(bench_free_port)
    local log="$BENCH_TMP/$b.log"
    if [[ $b == nginx ]]; then
        bench_start_nginx "$log" "$port" "$NGINX_WORKERS" || return 1
    else
        local extra=()
        # A blocking server holds a thread per keep-alive connection: give it one per connection.
        [[ $b == blocking ]] && extra=(--threads "$CONNS")
        # shellcheck disable=SC2086
        bench_start_sluice "$log" "$port" --backend "$b" --io-threads "$IO_THREADS" "${extra[@]}" \
            --set log_level=warn --set limits.max_connections=20000 $SLUICE_ARGS || return 1
    fi
    PORT[$b]=$port
    PID[$b]=$SERVER_PID
    MEM[$b]=$MEM_PIDS
}

start_all() {
    local b
    for b in $BACKENDS; do
        if start_server "$b"; then
            ACTIVE+=("$b")
            bench_say "$b listening on ${PORT[$b]} (pid ${PID[$b]})"
        else
            bench_say "$b skipped: $SERVER_ERROR"
            bench_row "backend=str:$b" "skipped=str:$SERVER_ERROR"
        fi
    done
}

load() {
    local b=$1 seconds=$2 out=$3
    bench_wrk "$out" "$seconds" -t"$WRK_THREADS" -c"$CONNS" -d"${seconds}s" --latency \
        "http://127.0.0.1:${PORT[$b]}$URL_PATH"
}

run_once() {
    local run=$1 b=$2 out="$BENCH_TMP/run$1-$2.txt" load_before cpu0 cpu1
    load_before=$(bench_loadavg)
    # shellcheck disable=SC2086
    cpu0=$(bench_cpu_ticks ${MEM[$b]})
    load "$b" "$DURATION" "$out"
    # shellcheck disable=SC2086
    cpu1=$(bench_cpu_ticks ${MEM[$b]})
    # shellcheck disable=SC2086
    bench_row "run=$run" "backend=str:$b" "loadavg=str:$load_before" @"$out.json" \
        "server_cpu_s=$(python3 -c "print(($cpu1 - $cpu0) / $(getconf CLK_TCK))")" \
        "rss_kib=$(bench_rss_kib ${MEM[$b]})" "threads=$(bench_threads ${MEM[$b]})" \
        "alive=$(bench_alive "${PID[$b]}" && echo true || echo false)"
    bench_say "run $run $b: $(bench_json "$out.json" rps) req/s, p99 $(bench_json "$out.json" p99_ms) ms," \
        "errors $(bench_json "$out.json" errors)"
}

main() {
    bench_init plaintext
    for k in BACKENDS IO_THREADS NGINX_WORKERS CONNS DURATION RUNS WRK_THREADS WARMUP URL_PATH SLUICE_ARGS; do
        bench_param "$k" "${!k}"
    done
    start_all
    ((${#ACTIVE[@]})) || bench_die "no server started"
    local b run
    for b in "${ACTIVE[@]}"; do
        load "$b" "$WARMUP" "$BENCH_TMP/warmup-$b.txt"
    done
    for ((run = 1; run <= RUNS; run++)); do
        for b in "${ACTIVE[@]}"; do
            run_once "$run" "$b"
        done
    done
    for b in "${ACTIVE[@]}"; do
        bench_stop "${PID[$b]}"
    done
    bench_note "wrk -t$WRK_THREADS -c$CONNS -d${DURATION}s --latency on the same 2-CPU host as the server: the client takes" \
        "about one CPU, so these are ratios under shared-CPU conditions, not capacity figures."
    bench_note "CPU us/req = the server's user+system CPU time during the run / requests answered (from" \
        "/proc/PID/stat, 10 ms ticks): less sensitive to the machine's other load than req/s, which" \
        "depends on how much CPU the server got."
    bench_note "Runs alternate between servers (run 1 of each, then run 2 of each, ...) so that machine noise hits" \
        "all of them alike; the median of the runs is reported."
    bench_report plaintext
}

main "$@"
