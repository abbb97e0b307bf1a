#!/usr/bin/env bash
# S2 (SCENARIOS.md): framework cost vs waiting cost. sluice-fastio serves /fast (at once), /io
# (after a 20 ms loop timer: the request is suspended, no thread waits) and /io-blocking (the
# handler sleeps 20 ms on its thread). Each server × route × connection count is one wrk run;
# nginx answers /fast with `return 200` and /io with `echo_sleep 0.02` (Debian's
# libnginx-mod-http-echo) in the same run, as the peer.
#
#   benchmarks/scenarios/s2.sh                 # every server, route and connection count
#   FAST=1 benchmarks/scenarios/s2.sh          # ~2.5 min: 1,000 and 5,000 connections, 5 s runs
#   SERVERS="epoll:inline nginx" ROUTES="/fast /io" CONNS="5000" benchmarks/scenarios/s2.sh
#
# A server is nginx, blocking (THREADS threads: 200, the Tomcat / Spring MVC default pool), or
# BACKEND:DISPATCH with DISPATCH inline or pool (WORKERS pool threads). The model for the
# blocking backend's /io and /io-blocking: THREADS / 20 ms = 10,000 req/s at 200 threads.
# Environment (defaults): SERVERS ("nginx epoll:inline epoll:pool uring:inline uring:pool blocking"),
# ROUTES ("/fast /io /io-blocking"), CONNS ("200 1000 5000"), DURATION (10 s; FAST: 5),
# IO_THREADS (1), THREADS (200), WORKERS (200), WRK_THREADS (1). The fd limit (20,000) bounds
# CONNS: one fd per connection in the server and in wrk.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FAST=${FAST:-0}
SERVERS=${SERVERS:-"nginx epoll:inline epoll:pool uring:inline uring:pool blocking"}
ROUTES=${ROUTES:-"/fast /io /io-blocking"}
if [[ $FAST == 1 ]]; then
    CONNS=${CONNS:-"1000 5000"}
    DURATION=${DURATION:-5}
else
    CONNS=${CONNS:-"200 1000 5000"}
    DURATION=${DURATION:-10}
fi
IO_THREADS=${IO_THREADS:-1}
THREADS=${THREADS:-200}
WORKERS=${WORKERS:-200}
WRK_THREADS=${WRK_THREADS:-1}

NGINX_IO_LOCATION='        location = /io {
            default_type application/json;
            echo_sleep 0.02;
            echo -n '"'"'{"message":"Hello, World!","service":"sluice-fastio","ok":1}'"'"';
        }
        location = /fast {
            default_type application/json;
            return 200 '"'"'{"message":"Hello, World!","service":"sluice-fastio","ok":1}'"'"';
        }'

# nginx with the echo module loaded (its packaged .so), else without /io.
start_nginx() {
    local port=$1
    bench_start_nginx "$BENCH_TMP/nginx-$port.log" "$port" 1 "$NGINX_IO_LOCATION"
}

start_server() {
    local server=$1 port=$2 conns=$3 backend dispatch
    IFS=: read -r backend dispatch <<<"$server"
    if [[ $backend == nginx ]]; then
        start_nginx "$port"
        return
    fi
    local args=(--backend "$backend" --set log_level=warn --set limits.max_connections=20000)
    if [[ $backend == blocking ]]; then
        args+=(--threads "$THREADS" --set "blocking.accept_queue=$((conns > 100 ? conns : 100))")
    else
        args+=(--io-threads "$IO_THREADS")
        [[ $dispatch == pool ]] && args+=(--dispatch pool --worker-threads "$WORKERS")
    fi
    bench_start_app sluice-fastio "$BENCH_TMP/server-${backend}-${dispatch:-}-$port.log" "$port" "${args[@]}"
}

run_point() {
    local server=$1 route=$2 conns=$3 port out
    port=$(bench_free_port)
    out="$BENCH_TMP/wrk-${server//:/-}-${route//\//}-$conns.txt"
    local row=("server=str:$server" "route=str:$route" "conns=$conns" "duration_s=$DURATION")
    if [[ $server == nginx && $route == /io-blocking ]]; then
        return # nginx has no thread to block
    fi
    if ! start_server "$server" "$port" "$conns"; then
        bench_say "$server $route $conns skipped: $SERVER_ERROR"
        bench_row "${row[@]}" "skipped=str:$SERVER_ERROR"
        return
    fi
    local pid=$SERVER_PID pids=$MEM_PIDS
    [[ $server == nginx ]] && pids="$SERVER_PID $MEM_PIDS"
    # shellcheck disable=SC2086 # pids is a list
    if ! bench_healthy "http://127.0.0.1:$port$route"; then
        bench_say "$server $route: not answering 200 (nginx without the echo module?)"
        bench_stop "$pid"
        bench_row "${row[@]}" "skipped=str:$route does not answer 200"
        return
    fi
    local cpu0 cpu1 t0 t1
    # shellcheck disable=SC2086
    cpu0=$(bench_cpu_ticks $pids)
    t0=$(date +%s.%N)
    bench_wrk "$out" "$DURATION" -t"$WRK_THREADS" -c"$conns" -d"${DURATION}s" --timeout 10s --latency \
        "http://127.0.0.1:$port$route" &
    local wrk_job=$!
    sleep $((DURATION / 2))
    local rss threads
    # shellcheck disable=SC2086
    rss=$(bench_rss_kib $pids)
    # shellcheck disable=SC2086
    threads=$(bench_threads $pids)
    wait "$wrk_job" || true
    # shellcheck disable=SC2086
    cpu1=$(bench_cpu_ticks $pids)
    t1=$(date +%s.%N)
    local watchdog="" log
    for log in "$BENCH_TMP"/server-*-"$port".log; do
        [[ -f $log ]] && watchdog=$(grep -m1 -i watchdog "$log" | tr -d '"\\' | cut -c1-240 || true)
    done
    local wd_count=0
    for log in "$BENCH_TMP"/server-*-"$port".log; do
        [[ -f $log ]] && wd_count=$(grep -ci watchdog "$log" || true)
    done
    bench_stop "$pid"
    bench_row "${row[@]}" @"$out.json" "rss_kib=$rss" "threads=$threads" \
        "server_cpu_s=$(python3 -c "print(($cpu1 - $cpu0) / $(getconf CLK_TCK))")" \
        "wall_s=$(python3 -c "print($t1 - $t0)")" "watchdog_lines=$wd_count" "watchdog=str:$watchdog" \
        "loadavg=str:$(bench_loadavg)"
    bench_say "$server $route c$conns: $(bench_json "$out.json" rps) req/s, p99 $(bench_json "$out.json" p99_ms) ms," \
        "errors $(bench_json "$out.json" errors), threads $threads, RSS ${rss} KiB${watchdog:+, watchdog: ${watchdog:0:80}}"
}

main() {
    bench_init s2
    command -v python3 >/dev/null || bench_die "python3 needed"
    for k in FAST SERVERS ROUTES CONNS DURATION IO_THREADS THREADS WORKERS WRK_THREADS; do
        bench_param "$k" "${!k}"
    done
    # The echo module: Debian installs its .so and a load_module snippet for the system nginx;
    # our nginx runs with its own prefix and config, so the module is loaded explicitly.
    if [[ -f /usr/lib/nginx/modules/ngx_http_echo_module.so ]]; then
        NGINX_LOAD_MODULES="load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;"
        export NGINX_LOAD_MODULES
    else
        bench_note "libnginx-mod-http-echo is not installed: nginx's /io row is skipped"
    fi
    local server route conns
    for conns in $CONNS; do
        for route in $ROUTES; do
            for server in $SERVERS; do
                run_point "$server" "$route" "$conns"
            done
        done
    done
    bench_note "Server CPU is utime+stime of the server's processes over the wrk run (from /proc); RSS and threads" \
        "are sampled halfway. wrk runs on the other vCPU of this 2-vCPU machine and caps every server near the" \
        "same req/s for /fast, so CPU per request is what separates them there."
    bench_note "/io model: a request waits 20 ms, so conns / 20 ms req/s at most (50,000 at 1,000 connections);" \
        "the blocking backend with $THREADS threads caps at $THREADS / 20 ms = $((THREADS * 50)) req/s."
    bench_report s2
    # Debian's python3 (with python3-matplotlib), not a python3 that another tool put first in PATH.
    local py=python3
    [[ -x /usr/bin/python3 ]] && py=/usr/bin/python3
    "$py" "$BENCH_DIR/scenarios/s2_report.py" plot "$RESULTS_DIR/s2-$BENCH_STAMP.json" || true
}

main "$@"
