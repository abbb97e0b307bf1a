#!/usr/bin/env bash
# Memory per idle TLS keep-alive connection (issue 9): tls_idle_client.py opens CONNS TLS
# connections (TLS 1.3, ECDSA P-256 certificate made for the run) that each did one GET / and
# stay idle, and reads the server's RSS before and after (nginx: master + worker). Every server
# (sluice on each backend of BACKENDS, 1 I/O thread, and nginx, 1 worker) is fresh for its
# measurement, one after the other in one run. Also measured at CONNS/SLOPE_DIVISOR on the way
# up: the marginal cost per connection, (growth at N - growth at N/5) / (4N/5), leaves out
# one-off growth (pools, arenas) that the average spreads over the connections.
# Goal (issue 9): sluice at most nginx's.
#
#   benchmarks/scenarios/tls_memory.sh
#
# Environment (defaults): CONNS (5000), BACKENDS ("epoll uring nginx"), SLOPE_DIVISOR (5).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONNS=${CONNS:-5000}
BACKENDS=${BACKENDS:-"epoll uring nginx"}
SLOPE_DIVISOR=${SLOPE_DIVISOR:-5}
CLIENT="$BENCH_DIR/scenarios/tls_idle_client.py"

measure() {
    local backend=$1 port pids out="$BENCH_TMP/client-$1.jsonl"
    port=$(bench_free_port)
    local row=("backend=str:$backend" "state=str:tls_keepalive" "connections=$CONNS" "goal_kib=null")
    if [[ $backend == nginx ]]; then
        NGINX_LISTEN_OPTS=ssl bench_start_nginx "$BENCH_TMP/nginx.log" "$port" 1 "$(bench_nginx_tls_server "$BENCH_TMP")" ||
            bench_die "nginx: $SERVER_ERROR"
        pids="$SERVER_PID,${MEM_PIDS// /,}"
    else
        if ! bench_start_sluice "$BENCH_TMP/sluice-$backend.log" "$port" --backend "$backend" --io-threads 1 \
            --set log_level=warn --set limits.max_connections=20000 --set limits.idle_timeout_ms=600000 \
            --set "tls.cert=$BENCH_TMP/cert.pem" --set "tls.key=$BENCH_TMP/key.pem"; then
            bench_row "${row[@]}" "size=str:full" "skipped=str:$SERVER_ERROR"
            return
        fi
        pids=$SERVER_PID
    fi
    local server=$SERVER_PID
    bench_healthy_tls "https://127.0.0.1:$port/" || bench_die "$backend does not answer https GET /"
    local cmd=(/usr/bin/python3 "$CLIENT" --port "$port" --pids "${pids%,}" --cafile "$BENCH_TMP/cert.pem"
        --counts "$((CONNS / SLOPE_DIVISOR)),$CONNS")
    bench_log_cmd "${cmd[*]}"
    timeout 600 "${cmd[@]}" >"$out" 2>"$out.err" || bench_say "$backend: the client failed: $(tail -n 1 "$out.err")"
    local healthy
    healthy=$(grep '"stage": "end"' "$out" | python3 -c 'import json,sys; print(str(json.loads(sys.stdin.read())["healthy_after"]).lower())' 2>/dev/null || echo false)
    grep '"stage": "held"' "$out" | head -n 1 >"$out.small"
    grep '"stage": "held"' "$out" | tail -n 1 >"$out.full"
    bench_row "${row[@]}" "size=str:small" @"$out.small" "healthy_after=$healthy"
    bench_row "${row[@]}" "size=str:full" @"$out.full" "healthy_after=$healthy"
    bench_say "$backend: $(cat "$out.full")"
    bench_stop "$server"
}

main() {
    bench_init tls_memory
    for k in CONNS BACKENDS SLOPE_DIVISOR; do bench_param "$k" "${!k}"; done
    bench_make_cert "$BENCH_TMP"
    local b
    for b in $BACKENDS; do
        measure "$b"
    done
    bench_note "Each connection: TLS 1.3 handshake (ECDSA P-256), one GET / (keep-alive), then idle; RSS read" \
        "2 s after the last one opened (nginx: master + worker). sluice: limits.idle_timeout_ms=600000;" \
        "nginx: keepalive_timeout 600s, ssl_session_cache shared:SSL:10m."
    bench_note "Goal (issue 9): sluice's KiB per idle TLS connection at most nginx's."
    bench_report memory
}

main "$@"
