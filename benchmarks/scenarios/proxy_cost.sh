#!/usr/bin/env bash
# Proxy cost (issue 7): server CPU per proxied request, sluice-gateway (async style, 1 I/O
# thread; one gateway per backend of BACKENDS) against nginx proxy_pass with upstream keepalive
# (1 worker), all in front of the same upstream answering at once (sluice-slow-backend GET
# /work?ms=0), wrk -t1 -cCONNS, alternating gateways and nginx in one run, RUNS times each. CPU per request = the proxy's utime + stime over
# the wrk run (/proc/PID/stat; nginx: master + worker) / the requests wrk completed. Goal: median
# ratio gateway / nginx <= 0.8.
#
#   benchmarks/scenarios/proxy_cost.sh
#
# Environment (defaults): RUNS (3), DURATION (10 s), CONNS (256), BACKENDS ("epoll uring": one
# gateway per backend, each measured in turn with nginx), STYLE (async), UPSTREAM_BACKEND (epoll).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${RUNS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-256}
BACKENDS=${BACKENDS:-${BACKEND:-"epoll uring"}}
STYLE=${STYLE:-async}
UPSTREAM_BACKEND=${UPSTREAM_BACKEND:-epoll}

measure() {
    local proxy=$1 run=$2 url=$3 out="$BENCH_TMP/wrk-$1-$2.txt"
    shift 3
    local pids=("$@") c0 u0 c1 u1 p0 p1 hz
    hz=$(getconf CLK_TCK)
    read -r c0 p0 < <(bench_cpu_ticks_split "${pids[@]}")
    u0=$(bench_cpu_ticks "$UPSTREAM_PID")
    bench_wrk "$out" "$DURATION" -t1 -c"$CONNS" -d"${DURATION}s" --timeout 10s --latency "$url"
    read -r c1 p1 < <(bench_cpu_ticks_split "${pids[@]}")
    u1=$(bench_cpu_ticks "$UPSTREAM_PID")
    local rss
    rss=$(bench_rss_kib "${pids[@]}")
    bench_row "proxy=str:$proxy" "run=$run" @"$out.json" "proxy_cpu_s=$(python3 -c "print(($c1 - $c0) / $hz)")" \
        "proxy_user_cpu_s=$(python3 -c "print(($p1 - $p0) / $hz)")" \
        "upstream_cpu_s=$(python3 -c "print(($u1 - $u0) / $hz)")" "rss_kib=$rss" "loadavg=str:$(bench_loadavg)"
    bench_say "$proxy run $run: $(bench_json "$out.json" rps) req/s, CPU $(((c1 - c0) * 1000 / hz)) ms," \
        "errors $(bench_json "$out.json" errors)"
}

main() {
    bench_init proxy_cost
    for k in RUNS DURATION CONNS BACKENDS STYLE UPSTREAM_BACKEND; do bench_param "$k" "${!k}"; done
    local up gw ng
    up=$(bench_free_port)
    bench_start_app sluice-slow-backend "$BENCH_TMP/upstream.log" "$up" --backend "$UPSTREAM_BACKEND" --io-threads 1 \
        --set log_level=warn --set limits.max_connections=20000 || bench_die "slow backend: $SERVER_ERROR"
    UPSTREAM_PID=$SERVER_PID
    local backend gw_pids=() gw_urls=() gw_names=()
    for backend in $BACKENDS; do
        gw=$(bench_free_port)
        if ! bench_start_app sluice-gateway "$BENCH_TMP/gateway-$backend.log" "$gw" --upstream "127.0.0.1:$up" \
            --pool-size "$CONNS" --backend "$backend" --io-threads 1 --set log_level=warn \
            --set limits.max_connections=20000; then
            bench_say "gateway on $backend skipped: $SERVER_ERROR"
            continue
        fi
        gw_pids+=("$SERVER_PID")
        gw_urls+=("http://127.0.0.1:$gw/api/$STYLE/work?ms=0")
        gw_names+=("sluice-gateway ($backend, $STYLE)")
    done
    ((${#gw_pids[@]} > 0)) || bench_die "no gateway started"
    ng=$(bench_free_port)
    bench_start_nginx "$BENCH_TMP/nginx.log" "$ng" 1 "        location /api/proxy/ {
            proxy_pass http://upstream_0ms/;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }" "    upstream upstream_0ms {
        server 127.0.0.1:$up;
        keepalive $CONNS;
        keepalive_requests 100000000;
        keepalive_timeout 600s;
    }" || bench_die "nginx: $SERVER_ERROR"
    local ng_pids
    read -r -a ng_pids <<<"$MEM_PIDS"
    ng_pids=("$SERVER_PID" "${ng_pids[@]}")
    local ng_url="http://127.0.0.1:$ng/api/proxy/work?ms=0" i url
    for ((i = 0; i < ${#gw_pids[@]}; i++)); do
        bench_healthy "${gw_urls[i]}" || bench_die "the gateway does not answer ${gw_urls[i]}"
    done
    bench_healthy "$ng_url" || bench_die "nginx does not answer $ng_url"
    # Warm every pool (and the page cache of the binaries) before the first measured run.
    for url in "${gw_urls[@]}" "$ng_url"; do
        timeout 20 wrk -t1 -c"$CONNS" -d2s "$url" >/dev/null 2>&1 || true
    done
    local run
    for ((run = 1; run <= RUNS; run++)); do
        for ((i = 0; i < ${#gw_pids[@]}; i++)); do
            measure "${gw_names[i]}" "$run" "${gw_urls[i]}" "${gw_pids[i]}"
        done
        measure "nginx proxy_pass" "$run" "$ng_url" "${ng_pids[@]}"
    done
    bench_note "CPU per request: the proxy's utime + stime over the wrk run / wrk's completed requests; nginx is" \
        "master + worker. The upstream's CPU per request is the same work for both (a check of the pairing)."
    bench_note "Goal (issue 7): median ratio sluice-gateway / nginx <= 0.8."
    bench_report proxy_cost
}

main "$@"
