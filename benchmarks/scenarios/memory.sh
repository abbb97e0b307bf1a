#!/usr/bin/env bash
# Memory per connection: RSS growth of the server while sluice-connhold holds many connections,
# divided by the connections the server actually holds (its fd count grows by one per each).
#
#   idle       IDLE_CONNS connections, connected only (no byte sent)
#   keepalive  IDLE_CONNS connections after one GET / each (idle keep-alive)
#   suspended  SUSP_CONNS requests GET /delay?ms=60000 in flight (the async timer holds them)
#
# Each measurement runs on a fresh server. For nginx (reference), "suspended" is a request
# proxied to a slow upstream (a sluice-hello /delay on another port), so nginx's figure includes
# its upstream connection and buffers; NGINX_SUSPENDED=0 skips it.
#
#   benchmarks/scenarios/memory.sh
#   BACKENDS="epoll uring nginx" IDLE_CONNS=10000 SUSP_CONNS=5000 benchmarks/scenarios/memory.sh
#
# Environment (defaults): BACKENDS ("epoll nginx"), STATES ("idle keepalive suspended"),
# IDLE_CONNS (10000), SUSP_CONNS (5000), IO_THREADS (1), CLOSE (rst: how the holder closes; rst
# avoids 10,000 TIME_WAIT sockets between measurements), NGINX_SUSPENDED (1), SLOPE_DIVISOR (5:
# each state is also measured at 1/5 of the connections, and the marginal cost per connection,
# (growth at N - growth at N/5) / (4N/5), is reported beside the average; 1 = off). The marginal
# figure separates per-connection memory from one-off growth under load (pools, buffer rings,
# allocator arenas) that the average spreads over the connections.
# The fd limit (20,000 per process here) bounds the counts: one fd per connection in the server
# and in the holder, two in nginx for a proxied request.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BACKENDS=${BACKENDS:-"epoll nginx"}
STATES=${STATES:-"idle keepalive suspended"}
IDLE_CONNS=${IDLE_CONNS:-10000}
SUSP_CONNS=${SUSP_CONNS:-5000}
IO_THREADS=${IO_THREADS:-1}
CLOSE=${CLOSE:-rst}
NGINX_SUSPENDED=${NGINX_SUSPENDED:-1}
SLOPE_DIVISOR=${SLOPE_DIVISOR:-5}
HOLD_DELAY_MS=60000

SLUICE_SET=(--set log_level=warn --set limits.max_connections=20000 --set limits.idle_timeout_ms=600000
    --set limits.header_timeout_ms=600000 --set async_timeout_ms=120000)

goal_kib() {
    case $1:$2 in
    epoll:idle | epoll:keepalive) echo 1 ;;
    epoll:suspended) echo 2 ;;
    uring:idle | uring:keepalive) echo 0.5 ;;
    uring:suspended) echo 2 ;;
    *) echo null ;;
    esac
}

conns_for() {
    [[ $1 == suspended ]] && echo "$SUSP_CONNS" || echo "$IDLE_CONNS"
}

# Starts the server for backend/state; sets SERVER_PID, MEM_PIDS, PORT, UPSTREAM_PID.
start_for() {
    local backend=$1 state=$2 n=$3
    PORT=$(bench_free_port)
    UPSTREAM_PID=""
    if [[ $backend != nginx ]]; then
        local extra=()
        [[ $backend == blocking ]] && extra=(--threads $((n + 16)) --set "blocking.accept_queue=$n")
        bench_start_sluice "$BENCH_TMP/$backend-$state.log" "$PORT" --backend "$backend" \
            --io-threads "$IO_THREADS" "${extra[@]}" "${SLUICE_SET[@]}"
        return
    fi
    local locations=""
    if [[ $state == suspended ]]; then
        local up_port
        up_port=$(bench_free_port)
        bench_start_sluice "$BENCH_TMP/upstream.log" "$up_port" --backend epoll "${SLUICE_SET[@]}" || return 1
        UPSTREAM_PID=$SERVER_PID
        locations="        location /delay { proxy_pass http://127.0.0.1:$up_port; proxy_read_timeout 600s; }"
    fi
    locations+=$'\n'"        client_header_timeout 600s;"
    bench_start_nginx "$BENCH_TMP/nginx-$state.log" "$PORT" "$IO_THREADS" "$locations"
}

request_for() {
    case $1 in
    idle) echo "" ;;
    # Escapes stay literal: sluice-connhold turns \r\n into CR LF itself.
    keepalive) printf '%s\n' 'GET / HTTP/1.1\r\nHost: x\r\n\r\n' ;;
    suspended) printf '%s\n' "GET /delay?ms=$HOLD_DELAY_MS HTTP/1.1\r\nHost: x\r\n\r\n" ;;
    esac
}

wait_for_for() {
    case $1 in
    idle) echo connected ;;
    keepalive) echo answered ;;
    suspended) echo sent ;;
    esac
}

# Waits (bounded) until the server holds N more fds and has read everything sent to it.
settle() {
    local port=$1 fds_target=$2 tenths=300 unread
    while ((tenths-- > 0)); do
        # shellcheck disable=SC2086
        if (($(bench_fds $MEM_PIDS) >= fds_target)); then
            unread=$(ss -Htn state established "sport = :$port" 2>/dev/null | awk '$1 > 0' | wc -l)
            ((unread == 0)) && break
        fi
        sleep 0.1
    done
    sleep 1 # let the last wakeups finish their allocations
}

measure() {
    local backend=$1 state=$2 n=$3 size=$4
    local row=("backend=str:$backend" "state=str:$state" "connections=$n" "size=str:$size"
        "goal_kib=$(goal_kib "$backend" "$state")")
    if [[ $backend == nginx && $state == suspended && $NGINX_SUSPENDED != 1 ]]; then
        bench_row "${row[@]}" "skipped=str:not measured (NGINX_SUSPENDED=0)"
        return
    fi
    if ! start_for "$backend" "$state" "$n"; then
        bench_say "$backend $state skipped: $SERVER_ERROR"
        bench_row "${row[@]}" "skipped=str:$SERVER_ERROR"
        return
    fi
    local server=$SERVER_PID url="http://127.0.0.1:$PORT/"
    # Warm the paths the measurement uses, so that first-use allocations are not counted.
    bench_healthy "$url" || true
    if [[ $state == suspended ]]; then
        curl -s -o /dev/null -m 5 "http://127.0.0.1:$PORT/delay?ms=10" || true
    fi
    sleep 0.5
    local rss0 fds0 fifo="$BENCH_TMP/hold-$backend-$state-$n.fifo" out="$BENCH_TMP/hold-$backend-$state-$n.json"
    local err="$BENCH_TMP/hold-$backend-$state-$n.err" per_conn_fds=1
    [[ $backend == nginx && $state == suspended ]] && per_conn_fds=2
    # shellcheck disable=SC2086
    rss0=$(bench_rss_kib $MEM_PIDS)
    # shellcheck disable=SC2086
    fds0=$(bench_fds $MEM_PIDS)
    mkfifo "$fifo"
    local req cmd
    req=$(request_for "$state")
    cmd=("$BIN_DIR/sluice-connhold" --port "$PORT" --connections "$n" --window 256 --wait "$(wait_for_for "$state")"
        --hold-stdin --deadline-ms 120000 --close "$CLOSE")
    [[ -n $req ]] && cmd+=(--request "$req")
    bench_log_cmd "${cmd[*]}"
    local fifo_fd
    exec {fifo_fd}<>"$fifo"
    "${cmd[@]}" <"$fifo" >"$out" 2>"$err" &
    local holder=$!
    STARTED_PIDS+=("$holder")
    local tenths=900
    while ((tenths-- > 0)) && ! grep -q '"event":"ready"' "$err" 2>/dev/null && bench_alive "$holder"; do
        sleep 0.1
    done
    settle "$PORT" $((fds0 + n * per_conn_fds))
    local rss1 fds1 threads
    # shellcheck disable=SC2086
    rss1=$(bench_rss_kib $MEM_PIDS)
    # shellcheck disable=SC2086
    fds1=$(bench_fds $MEM_PIDS)
    # shellcheck disable=SC2086
    threads=$(bench_threads $MEM_PIDS)
    echo release >&"$fifo_fd"
    bench_wait_exit "$holder" 60 || bench_stop "$holder"
    wait "$holder" 2>/dev/null || true
    bench_forget "$holder"
    exec {fifo_fd}>&-
    sleep 1
    local healthy=false
    bench_alive "$server" && bench_healthy "$url" && healthy=true
    [[ -n $UPSTREAM_PID ]] && bench_stop "$UPSTREAM_PID"
    bench_stop "$server"
    local held=$(((fds1 - fds0) / per_conn_fds))
    bench_row "${row[@]}" "held=$held" "rss_before_kib=$rss0" "rss_after_kib=$rss1" "fds_before=$fds0" \
        "fds_after=$fds1" "threads=$threads" "healthy_after=$healthy" \
        "errors=$(bench_json "$out" errors.total)" "holder=@$out"
    bench_say "$backend $state: held $held of $n, RSS $rss0 -> $rss1 KiB" \
        "($(python3 -c "print(round(($rss1 - $rss0) / max($held, 1), 3))") KiB/conn), healthy after: $healthy"
}

main() {
    bench_init memory
    for k in BACKENDS STATES IDLE_CONNS SUSP_CONNS IO_THREADS CLOSE NGINX_SUSPENDED SLOPE_DIVISOR; do
        bench_param "$k" "${!k}"
    done
    local b s n
    for b in $BACKENDS; do
        for s in $STATES; do
            n=$(conns_for "$s")
            ((SLOPE_DIVISOR > 1)) && measure "$b" "$s" $((n / SLOPE_DIVISOR)) small
            measure "$b" "$s" "$n" full
        done
    done
    bench_note "Marginal KiB/conn = (growth at N - growth at N/$SLOPE_DIVISOR) / (held at N - held at N/$SLOPE_DIVISOR): the" \
        "per-connection cost without the one-off growth; the goals are per connection, so this is the figure to" \
        "hold them against (the average is shown too)."
    bench_note "Average KiB per conn = (VmRSS while held - VmRSS before) / connections held, held = growth of the server's" \
        "open fds (halved for nginx proxying, which holds a client and an upstream fd per request). RSS is user" \
        "memory only: kernel socket buffers are not in it, for either server."
    bench_note "nginx: worker RSS (worker_processes $IO_THREADS); its 'suspended' is GET /delay proxied to a slow" \
        "upstream, so it includes the upstream connection and proxy buffers."
    bench_note "Goals (issue): epoll <= 1 KiB per idle connection, <= 2 KiB per suspended request; uring <= 0.5" \
        "KiB idle. The holder's close is '$CLOSE'; 'healthy after' = the server still answers GET / after all" \
        "held connections were closed."
    bench_report memory
}

main "$@"
