#!/usr/bin/env bash
# S1 in miniature ("the backend takes N seconds"): a sync server with T threads caps at T/delay
# req/s and its latency grows as users/T x delay; an async server reaches users/delay req/s at
# latency = delay. sluice-hello stands in for the gateway: /sleep?ms=D blocks a thread (sync),
# /delay?ms=D completes from a loop timer (async "complete"), /delay-resume?ms=D resumes the
# handler (async "resume"). Each case is measured by wrk against that model.
#
#   benchmarks/scenarios/s1_mini.sh            # blocking:100 (50 threads, sync) and epoll:1000 (async)
#   BACKENDS="blocking epoll" USERS="500 1000 1500" DELAY_MS=3000 benchmarks/scenarios/s1_mini.sh
#   CASES="epoll:1000:resume epoll:200:sync" benchmarks/scenarios/s1_mini.sh
#
# A case is backend:users[:mode], mode sync|complete|resume (default: sync on blocking, complete
# elsewhere; sync on a reactor backend runs the handler on a pool of THREADS workers; on the
# blocking backend every mode is bound by its THREADS threads).
# BACKENDS x USERS, when either is set, replaces the default CASES.
# Environment (defaults): DELAY_MS (1000), THREADS (50: blocking threads or pool workers),
# IO_THREADS (1), DURATION (15 s), WRK_THREADS (2).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DELAY_MS=${DELAY_MS:-1000}
THREADS=${THREADS:-50}
IO_THREADS=${IO_THREADS:-1}
DURATION=${DURATION:-15}
WRK_THREADS=${WRK_THREADS:-2}

cases() {
    if [[ -n ${BACKENDS:-} || -n ${USERS:-} ]]; then
        local b u
        for b in ${BACKENDS:-blocking epoll}; do
            for u in ${USERS:-100 1000}; do
                echo "$b:$u"
            done
        done
    else
        echo "${CASES:-blocking:100 epoll:1000}" | tr ' ' '\n'
    fi
}

default_mode() {
    [[ $1 == blocking ]] && echo sync || echo complete
}

path_for_mode() {
    case $1 in
    sync) echo "/sleep?ms=$DELAY_MS" ;;
    complete) echo "/delay?ms=$DELAY_MS" ;;
    resume) echo "/delay-resume?ms=$DELAY_MS" ;;
    *) bench_die "unknown mode $1 (sync|complete|resume)" ;;
    esac
}

# Threads bound the concurrency of sync handlers, and of every handler on the blocking backend,
# whose threads stay with their connection while a request is suspended.
thread_bound() {
    [[ $1 == blocking || $2 == sync ]]
}

# Prints "model_rps model_latency_ms" for backend mode users.
model() {
    local backend=$1 mode=$2 users=$3 bound=0
    thread_bound "$backend" "$mode" && bound=1
    python3 - "$bound" "$users" "$THREADS" "$DELAY_MS" <<'EOF'
import sys
bound, users, threads, delay_ms = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
concurrent = min(users, threads) if bound else users
latency = delay_ms * max(1.0, users / concurrent)
print(f"{concurrent * 1000.0 / delay_ms:.1f} {latency:.0f}")
EOF
}

start_case_server() {
    local backend=$1 mode=$2 users=$3 port=$4
    local args=(--backend "$backend" --set log_level=warn --set limits.max_connections=20000
        --set async_timeout_ms=$((DELAY_MS * 10 + 10000)))
    if [[ $backend == blocking ]]; then
        # Every user waits for a thread (as in the published runs) instead of being turned away.
        args+=(--threads "$THREADS" --set "blocking.accept_queue=$((users > 100 ? users : 100))")
    else
        args+=(--io-threads "$IO_THREADS")
        [[ $mode == sync ]] && args+=(--dispatch pool --worker-threads "$THREADS")
    fi
    bench_start_sluice "$BENCH_TMP/server-$backend-$users-$mode.log" "$port" "${args[@]}"
}

run_case() {
    local spec=$1 backend users mode
    IFS=: read -r backend users mode <<<"$spec"
    mode=${mode:-$(default_mode "$backend")}
    local port out="$BENCH_TMP/wrk-$backend-$users-$mode.txt" m
    port=$(bench_free_port)
    m=$(model "$backend" "$mode" "$users")
    local row=("backend=str:$backend" "mode=str:$mode" "users=$users" "delay_ms=$DELAY_MS"
        "threads_cfg=$(thread_bound "$backend" "$mode" && echo "$THREADS" || echo null)"
        "model_rps=${m% *}" "model_latency_ms=${m#* }")
    if ! start_case_server "$backend" "$mode" "$users" "$port"; then
        bench_say "$spec skipped: $SERVER_ERROR"
        bench_row "${row[@]}" "skipped=str:$SERVER_ERROR"
        return
    fi
    local pid=$SERVER_PID timeout_s=$(((${m#* } * 3) / 1000 + 10))
    local load_before
    load_before=$(bench_loadavg)
    bench_wrk "$out" "$DURATION" -t"$WRK_THREADS" -c"$users" -d"${DURATION}s" --timeout "${timeout_s}s" --latency \
        "http://127.0.0.1:$port$(path_for_mode "$mode")" &
    local wrk_job=$!
    sleep $((DURATION / 2))
    local rss threads fds
    rss=$(bench_rss_kib "$pid")
    threads=$(bench_threads "$pid")
    fds=$(bench_fds "$pid")
    wait "$wrk_job" || true
    local alive=false
    bench_alive "$pid" && alive=true
    bench_stop "$pid"
    bench_row "${row[@]}" "loadavg=str:$load_before" @"$out.json" "rss_kib=$rss" "threads=$threads" \
        "fds=$fds" "alive_after=$alive"
    bench_say "$spec ($mode): $(bench_json "$out.json" rps) req/s (model ${m% *}), p99 $(bench_json "$out.json" p99_ms)" \
        "ms, errors $(bench_json "$out.json" errors)"
}

main() {
    bench_init s1_mini
    for k in DELAY_MS THREADS IO_THREADS DURATION WRK_THREADS; do
        bench_param "$k" "${!k}"
    done
    bench_param CASES "$(cases | tr '\n' ' ')"
    local spec
    for spec in $(cases); do
        run_case "$spec"
    done
    bench_note "Model: sync with T threads -> min(users, T)/delay req/s at delay x max(1, users/T); async ->" \
        "users/delay req/s at delay. wrk is a closed loop over DURATION s: requests still in flight at the end are" \
        "not counted, so up to one round (delay/DURATION = $((DELAY_MS / 10 / DURATION))%) can be lost to the window."
    bench_note "Threads, RSS and fds of the server are sampled halfway through the run."
    bench_report s1
}

main "$@"
