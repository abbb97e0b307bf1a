#!/usr/bin/env bash
# S1 through the gateway ("the backend takes 3 seconds", issue 7): wrk -c USERS against
# sluice-gateway, in front of sluice-slow-backend answering /work?ms=DELAY_MS from a loop timer.
# An async gateway reaches USERS/delay TPS at latency = delay; a sync one with T threads caps at
# T/delay (the Tomcat 6 row: 500 threads -> 166.7 TPS).
#
#   benchmarks/scenarios/s1_gateway.sh     # async, resume, co on epoll and uring; blocking:sync
#   CASES="epoll:async epoll:async epoll:async" benchmarks/scenarios/s1_gateway.sh
#   FULL=1 benchmarks/scenarios/s1_gateway.sh  # every backend x style x users {500 ... 9,000} + nginx
#   FAST=1 benchmarks/scenarios/s1_gateway.sh  # scripts/demo: 500/1,000/1,500 users, 16 s a point
#
# A case is backend:style (style sync|async|resume|co: /api/{style}/work?ms=DELAY_MS), or
# nginx:proxy: nginx as the gateway (proxy_pass to an upstream {} with keepalive, 1 worker per
# I/O thread) to the same slow backend, the peer measured in the same run. A case may repeat:
# the report then adds the medians per backend and style. USERS may be a list: every case runs
# at every count. PLOT=1 (default) writes TPS and p99 vs users (PNG, SVG) beside the results.
#
# TPS is the backend's completions in a steady window, not wrk's average (which counts the first
# round, spent waiting, and loses the requests in flight at the end): stats_sampler.py reads the
# backend's GET /stats every 0.5 s from the start of wrk, and TPS = (served at WINDOW_END -
# served at WINDOW_START) / (the time between the two samples). wrk opens all its connections at
# once, so the completions come in waves, one round (DELAY_MS) apart: the window starts 1 s after
# the first wave (WINDOW_START_S = 4) and spans a whole number of rounds, ending at the last such
# point before DURATION - 1 (DURATION 23 -> [4 s, 22 s], 6 rounds). A window that cut a wave in
# two would count a fraction of it and read e.g. 469 for 500.
# Also recorded: the backend's max_in_flight over the run (POST /stats/reset before each case),
# wrk's errors and latency, the gateway's CPU time over the run (per request wrk completed), and
# its RSS, threads and fds sampled halfway through.
#
# Memory per in-flight request: the gateway's RSS (or nginx's, master + worker) before the load
# and halfway through it, and the backend's in_flight at that moment (every user's request is
# in flight at the gateway then): (RSS mid - RSS idle) / in flight.
#
# Environment (defaults): USERS (1500), DELAY_MS (3000), DURATION (23 s), WINDOW_START_S (4),
# IO_THREADS (1: the gateway's I/O loops on epoll/uring), BLOCKING_THREADS (500: the gateway's
# threads on blocking), POOL_SIZE (USERS: upstream connections per loop), WRK_THREADS (2),
# UPSTREAM_BACKEND (epoll: the slow backend's), UPSTREAM_IO_THREADS (1), LOAD_TOOL (wrk, or
# sluice-load), RAMP_UP_S (0: sluice-load only; wrk always opens every connection at once),
# DOWNSTREAM_TLS (0; 1: the gateway's listener speaks TLS with an ECDSA P-256 certificate made for
# the run, and the load tool connects with https, trusting that certificate; nginx:proxy gets the
# same certificate and suites; the upstream side stays plaintext).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ ${FULL:-0} == 1 ]]; then
    USERS=${USERS:-"500 1000 1500 5000 9000"}
    CASES=${CASES:-"blocking:sync epoll:sync epoll:async epoll:resume epoll:co uring:async uring:resume uring:co nginx:proxy"}
elif [[ ${FAST:-0} == 1 ]]; then
    USERS=${USERS:-"500 1000 1500"}
    CASES=${CASES:-"blocking:sync epoll:async uring:async nginx:proxy"}
    DURATION=${DURATION:-16}
fi
USERS_LIST=${USERS:-1500}
DELAY_MS=${DELAY_MS:-3000}
DURATION=${DURATION:-23}
WINDOW_START_S=${WINDOW_START_S:-4}
IO_THREADS=${IO_THREADS:-1}
BLOCKING_THREADS=${BLOCKING_THREADS:-500}
POOL_SIZE_CFG=${POOL_SIZE:-}
WRK_THREADS=${WRK_THREADS:-2}
UPSTREAM_BACKEND=${UPSTREAM_BACKEND:-epoll}
UPSTREAM_IO_THREADS=${UPSTREAM_IO_THREADS:-1}
CASES=${CASES:-"epoll:async epoll:resume epoll:co uring:async uring:resume uring:co blocking:sync"}
PLOT=${PLOT:-1}
LOAD_TOOL=${LOAD_TOOL:-wrk}
RAMP_UP_S=${RAMP_UP_S:-0}
DOWNSTREAM_TLS=${DOWNSTREAM_TLS:-0}
SCHEME=$([[ $DOWNSTREAM_TLS == 1 ]] && echo https || echo http)
SAMPLER="$BENCH_DIR/scenarios/stats_sampler.py"
# Debian's matplotlib is in the system python, not necessarily in the first python3 on PATH.
PLOT_PYTHON=${PLOT_PYTHON:-$([[ -x /usr/bin/python3 ]] && echo /usr/bin/python3 || echo python3)}

# The window's end: WINDOW_START_S + k rounds, the largest k that stays at or before DURATION - 1.
window_end() {
    python3 -c "import sys; s, r, d = map(float, sys.argv[1:]); k = int((d - 1 - s) // r); print(f'{s + k * r:g}')" \
        "$WINDOW_START_S" "$(python3 -c "print($DELAY_MS / 1000)")" "$DURATION"
}

# Prints the model TPS of a case: a sync handler holds one of BLOCKING_THREADS threads (blocking's
# connection threads, or the worker pool on a reactor) per request.
model_tps() {
    local concurrent=$USERS
    [[ $1 == sync ]] && concurrent=$((USERS < BLOCKING_THREADS ? USERS : BLOCKING_THREADS))
    python3 -c "print(round($concurrent * 1000.0 / $DELAY_MS, 1))"
}

backend_stats() {
    curl -s -m 2 "http://127.0.0.1:$UPSTREAM_PORT/stats" || true
}

# Waits (at most 15 s) until nothing is in flight at the backend, then zeroes its counters.
reset_backend() {
    local tenths=150
    while ((tenths-- > 0)); do
        [[ $(backend_stats) == *'"in_flight":0,'* ]] && break
        sleep 0.1
    done
    curl -s -m 2 -X POST "http://127.0.0.1:$UPSTREAM_PORT/stats/reset" >/dev/null ||
        bench_die "POST /stats/reset to the backend failed"
}

# sluice-load instead of wrk (LOAD_TOOL=sluice-load): the same closed loop, with RAMP_UP_S to
# start the users evenly instead of all at once. OUT.json gets wrk's keys (rps, p50/p99, errors).
load_sluice() {
    local out=$1 url=$2
    local cmd=("$BIN_DIR/sluice-load" --users "$USERS" --ramp-up "$RAMP_UP_S" --duration "$DURATION" --timeout 30
        --json --no-progress "$url")
    # The run's own certificate (bench_make_cert) is self-signed: trust it, and only it.
    [[ $DOWNSTREAM_TLS == 1 ]] && cmd+=(--cacert "$BENCH_TMP/cert.pem")
    bench_log_cmd "${cmd[*]}"
    timeout --kill-after=5 $((DURATION + 60)) "${cmd[@]}" >"$out" 2>"$out.err" || true
    python3 -c '
import json, sys
try:
    d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
except (OSError, ValueError, IndexError):
    print("{}"); sys.exit(0)
k = d["errors_by_kind"]
print(json.dumps({"requests": d["samples"], "duration_s": d["elapsed_s"], "rps": d["throughput"],
                  "lat_avg_ms": d["avg_ms"], "lat_max_ms": d["max_ms"], "p50_ms": d["p50_ms"], "p90_ms": d["p90_ms"],
                  "p99_ms": d["p99_ms"], "err_connect": k["connect"], "err_read": k["reset"] + k["other"],
                  "err_write": 0, "err_timeout": k["timeout"], "non_2xx": k["non_2xx"], "errors": d["errors"],
                  "ok": True}))' "$out" >"$out.json"
}

start_upstream() {
    UPSTREAM_PORT=$(bench_free_port)
    bench_start_app sluice-slow-backend "$BENCH_TMP/upstream.log" "$UPSTREAM_PORT" --backend "$UPSTREAM_BACKEND" \
        --io-threads "$UPSTREAM_IO_THREADS" --set log_level=warn --set limits.max_connections=20000 ||
        bench_die "sluice-slow-backend did not start: $SERVER_ERROR"
    UPSTREAM_PID=$SERVER_PID
}

# nginx as the gateway: /api/proxy/work?ms=N -> the backend's /work?ms=N over pooled keep-alive
# connections (proxy_http_version 1.1 and an empty Connection header, as nginx's docs say).
start_nginx_gateway() {
    local port=$1 log=$2
    local http_extra="    upstream s1_backend {
        server 127.0.0.1:$UPSTREAM_PORT;
        keepalive $POOL_SIZE;
        keepalive_requests 100000000;
        keepalive_timeout 600s;
    }"
    local locations="        location /api/proxy/ {
            proxy_pass http://s1_backend/;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_read_timeout 60s;
            proxy_connect_timeout 2s;
        }"
    if [[ $DOWNSTREAM_TLS == 1 ]]; then
        locations="$(bench_nginx_tls_server "$BENCH_TMP")
$locations"
        NGINX_LISTEN_OPTS=ssl bench_start_nginx "$log" "$port" "$IO_THREADS" "$locations" "$http_extra"
        return
    fi
    bench_start_nginx "$log" "$port" "$IO_THREADS" "$locations" "$http_extra"
}

start_gateway() {
    local backend=$1 style=$2 port=$3
    if [[ $backend == nginx ]]; then
        start_nginx_gateway "$port" "$BENCH_TMP/gateway-nginx.log"
        return
    fi
    local args=(--upstream "127.0.0.1:$UPSTREAM_PORT" --pool-size "$POOL_SIZE" --backend "$backend"
        --set log_level=warn --set limits.max_connections=20000)
    [[ $DOWNSTREAM_TLS == 1 ]] && args+=(--set "tls.cert=$BENCH_TMP/cert.pem" --set "tls.key=$BENCH_TMP/key.pem")
    if [[ $backend == blocking ]]; then
        # Every user waits for a thread (as in the published runs) instead of being turned away.
        args+=(--threads "$BLOCKING_THREADS" --set "blocking.accept_queue=$USERS")
    else
        args+=(--io-threads "$IO_THREADS")
        # A sync handler on a reactor: the Servlet container with sync handlers (a pool of
        # BLOCKING_THREADS workers, each blocked for the whole upstream call).
        [[ $style == sync ]] && args+=(--dispatch pool --worker-threads "$BLOCKING_THREADS")
    fi
    bench_start_app sluice-gateway "$BENCH_TMP/gateway-$backend-$style.log" "$port" "${args[@]}"
}

run_case() {
    local spec=$1 backend style
    IFS=: read -r backend style <<<"$spec"
    local port model wend out="$BENCH_TMP/wrk-$backend-$style-$RANDOM.txt"
    port=$(bench_free_port)
    model=$(model_tps "$style")
    wend=$(window_end)
    local row=("backend=str:$backend" "style=str:$style" "users=$USERS" "delay_ms=$DELAY_MS" "model_tps=$model"
        "pool_size=$POOL_SIZE"
        "threads_cfg=$([[ $backend == blocking ]] && echo "$BLOCKING_THREADS" || echo "$IO_THREADS")"
        "load_tool=str:$LOAD_TOOL" "ramp_up_s=$RAMP_UP_S" "downstream_tls=$DOWNSTREAM_TLS")
    bench_alive "$UPSTREAM_PID" || bench_die "sluice-slow-backend (pid $UPSTREAM_PID) died"
    if ! start_gateway "$backend" "$style" "$port"; then
        bench_say "$spec skipped: $SERVER_ERROR"
        bench_row "${row[@]}" "skipped=str:$SERVER_ERROR"
        return
    fi
    local pid=$SERVER_PID mem_pids
    # shellcheck disable=SC2153 # MEM_PIDS is set by bench_start_app / bench_start_nginx (lib.sh)
    read -r -a mem_pids <<<"$MEM_PIDS"
    [[ $backend == nginx ]] && mem_pids=("$SERVER_PID" "${mem_pids[@]}") # master + workers, as ps shows nginx
    local healthy=bench_healthy
    [[ $DOWNSTREAM_TLS == 1 ]] && healthy=bench_healthy_tls
    $healthy "$SCHEME://127.0.0.1:$port/api/$style/work?ms=1" ||
        bench_say "$spec: the gateway did not answer a first /api/$style/work?ms=1 with 200"
    reset_backend
    local rss_idle
    rss_idle=$(bench_rss_kib "${mem_pids[@]}")
    # The sampler starts first and counts from the instant the load starts: a Python start-up
    # beside the load's first round added ~20-100 ms to every request of it (wrk's p99).
    local start_at
    start_at=$(awk -v now="$(date +%s.%N)" 'BEGIN { printf "%.3f", now + 2 }')
    python3 "$SAMPLER" --port "$UPSTREAM_PORT" --duration "$DURATION" --start-at "$start_at" \
        >"$out.samples" 2>"$out.samples.err" &
    local sampler=$!
    STARTED_PIDS+=("$sampler")
    sleep "$(awk -v at="$start_at" -v now="$(date +%s.%N)" 'BEGIN { d = at - now; printf "%.3f", (d > 0 ? d : 0) }')"
    local url="$SCHEME://127.0.0.1:$port/api/$style/work?ms=$DELAY_MS"
    if [[ $LOAD_TOOL == sluice-load ]]; then
        load_sluice "$out" "$url" &
    else
        bench_wrk "$out" "$DURATION" -t"$WRK_THREADS" -c"$USERS" -d"${DURATION}s" --timeout 30s --latency "$url" &
    fi
    local wrk_job=$! cpu0
    cpu0=$(bench_cpu_ticks "${mem_pids[@]}")
    sleep $((DURATION / 2))
    local rss threads fds in_flight_mid
    rss=$(bench_rss_kib "${mem_pids[@]}")
    threads=$(bench_threads "${mem_pids[@]}")
    fds=$(bench_fds "${mem_pids[@]}")
    in_flight_mid=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("in_flight"))' "$(backend_stats)" \
        2>/dev/null || echo null)
    wait "$wrk_job" || true
    local cpu_s
    cpu_s=$(python3 -c "print(($(bench_cpu_ticks "${mem_pids[@]}") - $cpu0) / $(getconf CLK_TCK))")
    bench_wait_exit "$sampler" 10 || bench_stop "$sampler" 1
    wait "$sampler" 2>/dev/null || true
    bench_forget "$sampler"
    local stats max_in_flight
    stats=$(backend_stats)
    max_in_flight=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("max_in_flight"))' "$stats" \
        2>/dev/null || echo null)
    python3 "$BENCHLIB" s1-window "$out.samples" "$WINDOW_START_S" "$wend" >"$out.window"
    local alive=false
    bench_alive "$pid" && alive=true
    bench_stop "$pid"
    bench_row "${row[@]}" @"$out.json" @"$out.window" "backend_max_in_flight=$max_in_flight" \
        "gateway_cpu_s=$cpu_s" "rss_kib=$rss" "rss_idle_kib=$rss_idle" "backend_in_flight_mid=$in_flight_mid" \
        "threads=$threads" "fds=$fds" "alive_after=$alive" "loadavg=str:$(bench_loadavg)"
    local tps
    tps=$(bench_json "$out.window" tps_window)
    [[ -n $tps ]] && tps=$(printf '%.1f' "$tps")
    bench_say "$spec @ $USERS users: ${tps:-?} TPS in the window (model $model)," \
        "max in flight $max_in_flight, p99 $(bench_json "$out.json" p99_ms) ms, errors $(bench_json "$out.json" errors)," \
        "RSS $rss KiB, threads $threads, fds $fds"
}

main() {
    bench_init s1_gateway
    for k in USERS_LIST DELAY_MS DURATION WINDOW_START_S IO_THREADS BLOCKING_THREADS POOL_SIZE_CFG WRK_THREADS LOAD_TOOL RAMP_UP_S \
        UPSTREAM_BACKEND UPSTREAM_IO_THREADS DOWNSTREAM_TLS; do
        bench_param "$k" "${!k}"
    done
    bench_param CASES "$CASES"
    bench_param WINDOW "${WINDOW_START_S}-$(window_end) s"
    if [[ $DOWNSTREAM_TLS == 1 ]]; then
        bench_make_cert "$BENCH_TMP"
        bench_note "Downstream TLS: the gateway's listener speaks TLS (ECDSA P-256, made for the run; TLS 1.3);" \
            "$LOAD_TOOL's connections are https, each one handshake when its user starts (wrk: all at once;" \
            "sluice-load: over RAMP_UP_S); the upstream side is plaintext."
    fi
    start_upstream
    local spec n=0 total
    total=$(($(wc -w <<<"$USERS_LIST") * $(wc -w <<<"$CASES")))
    for USERS in $USERS_LIST; do
        POOL_SIZE=${POOL_SIZE_CFG:-$USERS}
        for spec in $CASES; do
            n=$((n + 1))
            bench_say "point $n/$total: $spec at $USERS users (${DURATION} s)"
            run_case "$spec"
        done
    done
    bench_note "TPS (window): the backend's served counter (GET /stats, sampled every 0.5 s from the start of wrk)" \
        "between the samples nearest ${WINDOW_START_S} s and $(window_end) s, divided by the time between them: a" \
        "whole number of $((DELAY_MS / 1000))-s rounds after the first; wrk's req/s (whole run) is shown for comparison."
    bench_note "Expectation (issue 7): async/resume/co >= 0.995 x model, 0 errors, p99 <= 3,100 ms;" \
        "sync on blocking with $BLOCKING_THREADS threads = model +- 2%."
    bench_note "backend max in flight: the slow backend's max_in_flight over the case (POST /stats/reset before it)." \
        "Gateway RSS, threads and fds are sampled halfway through the run."
    bench_note "nginx:proxy: nginx as the gateway (proxy_pass to an upstream {} with keepalive = pool size, 1.1," \
        "worker_processes = IO_THREADS); its RSS, threads and CPU are the master's plus the workers'."
    bench_note "memory per in-flight request: (RSS halfway - RSS before the load) / the backend's in_flight halfway."
    bench_report s1_gateway
    if [[ $PLOT == 1 ]]; then
        local base="$RESULTS_DIR/s1_gateway-$BENCH_STAMP"
        "$PLOT_PYTHON" "$BENCH_DIR/scenarios/s1_plot.py" "$base.json" "$base" ||
            bench_say "no plot (matplotlib missing? scripts/bootstrap installs python3-matplotlib)"
    fi
}

main "$@"
