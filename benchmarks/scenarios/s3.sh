#!/usr/bin/env bash
# S3 (SCENARIOS.md, seed 000): a gateway lists files (GET, a small upstream answer) and uploads
# a 74 KB file (POST multipart) to an object store behind a thin uplink, through a sync client
# (the Tomcat + Apache client row: 200 threads, pool of 100) or an async one (Netty: pool of 100),
# with and without a limit on uploads in flight. JMeter shape: USERS users × LOOPS requests,
# ramp-up 5 s, driven by sluice-load.
#
#   sluice-load -> sluice-gateway (variant) -> sluice-slow-backend --bandwidth-mbit BANDWIDTH_MBIT
#
# The backend shares its link fairly among the uploads in progress (as TCP flows on one
# bottleneck do: apps/slow_backend/shared_link.h), so N uploads at once all finish after
# N × 74 KB / bandwidth: the bufferbloat the seed describes. A call the gateway's upstream
# response timeout cuts off is a 504, an error for the user.
#
#   benchmarks/scenarios/s3.sh                      # the published experiments, 74 Mbit/s
#   THIN=1 benchmarks/scenarios/s3.sh               # a link that is the bottleneck (see below)
#   FAST=1 benchmarks/scenarios/s3.sh               # upload 50 × 5 and list 200 × 5 only
#   EXPERIMENTS="upload:50" VARIANTS="async limited" benchmarks/scenarios/s3.sh
#
# Variants (the gateway's flags):
#   sync      --backend blocking --threads 200 --pool-size 100   /api/sync/...  (a blocking client call)
#   async     --backend epoll --io-threads 1 --pool-size 100       /api/async/... (suspend, callback, complete)
#   limited   async + --limit LIMIT --limit-queue 1000 --limit-wait-ms LIMIT_WAIT_MS
# Experiments: list:USERS or upload:USERS, each USERS × LOOPS with RAMP_UP.
# Environment (defaults): EXPERIMENTS ("list:50 upload:50 list:200 upload:20 list:1000"), VARIANTS
# ("sync async limited"), LOOPS (5), RAMP_UP (5 s), BANDWIDTH_MBIT (74), RESPONSE_TIMEOUT_MS
# (30000: the gateway's upstream call), CLIENT_TIMEOUT_S (60: sluice-load's, above the gateway's so
# that the gateway's answer is what the user sees), LIMIT (20), LIMIT_WAIT_MS (30000),
# UPLOAD_BYTES (75776 = 74 KiB).
# THIN=1 sets BANDWIDTH_MBIT=7 and RESPONSE_TIMEOUT_MS=3000 unless they are given: the
# published sync upload at 50 users took 4.5 s on average, which is 50 × 74 KB in 4.5 s ≈ 6.6
# Mbit/s of effective uplink (the backend takes whole Mbit/s), and an object-store client's
# timeout of a few seconds.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FAST=${FAST:-0}
THIN=${THIN:-0}
if [[ $FAST == 1 ]]; then
    EXPERIMENTS=${EXPERIMENTS:-"upload:50 list:200"}
else
    EXPERIMENTS=${EXPERIMENTS:-"list:50 upload:50 list:200 upload:20 list:1000"}
fi
if [[ $THIN == 1 ]]; then
    BANDWIDTH_MBIT=${BANDWIDTH_MBIT:-7}
    RESPONSE_TIMEOUT_MS=${RESPONSE_TIMEOUT_MS:-3000}
fi
VARIANTS=${VARIANTS:-"sync async limited"}
LOOPS=${LOOPS:-5}
RAMP_UP=${RAMP_UP:-5}
BANDWIDTH_MBIT=${BANDWIDTH_MBIT:-74}
RESPONSE_TIMEOUT_MS=${RESPONSE_TIMEOUT_MS:-30000}
CLIENT_TIMEOUT_S=${CLIENT_TIMEOUT_S:-60}
LIMIT=${LIMIT:-20}
LIMIT_WAIT_MS=${LIMIT_WAIT_MS:-30000}
UPLOAD_BYTES=${UPLOAD_BYTES:-75776}

start_backend() {
    local port=$1
    bench_start_app sluice-slow-backend "$BENCH_TMP/backend-$port.log" "$port" --backend epoll --io-threads 1 \
        --bandwidth-mbit "$BANDWIDTH_MBIT" --set log_level=warn --set limits.max_connections=20000 \
        --set limits.max_body_bytes=1048576
}

start_gateway() {
    local variant=$1 port=$2 upstream=$3
    local args=(--upstream "127.0.0.1:$upstream" --pool-size 100 --response-timeout-ms "$RESPONSE_TIMEOUT_MS"
        --set log_level=warn --set limits.max_connections=20000 --set limits.max_body_bytes=1048576)
    case $variant in
    sync) args+=(--backend blocking --threads 200 --set blocking.accept_queue=2000) ;;
    async) args+=(--backend epoll --io-threads 1) ;;
    limited) args+=(--backend epoll --io-threads 1 --limit "$LIMIT" --limit-queue 1000 --limit-wait-ms "$LIMIT_WAIT_MS") ;;
    *) bench_die "unknown variant $variant (sync|async|limited)" ;;
    esac
    bench_start_app sluice-gateway "$BENCH_TMP/gateway-$variant-$port.log" "$port" "${args[@]}"
}

style_of() {
    [[ $1 == sync ]] && echo sync || echo async
}

# Samples PID's threads and RSS every 0.5 s until the file STOP exists; prints the maxima.
sample_max() {
    local pid=$1 stop=$2 threads=0 rss=0 t r
    while [[ ! -e $stop ]] && bench_alive "$pid"; do
        t=$(bench_threads "$pid")
        r=$(bench_rss_kib "$pid")
        ((t > threads)) && threads=$t
        ((r > rss)) && rss=$r
        sleep 0.5
    done
    echo "{\"max_threads\": $threads, \"max_rss_kib\": $rss}"
}

run_point() {
    local variant=$1 experiment=$2 kind users
    IFS=: read -r kind users <<<"$experiment"
    local row=("variant=str:$variant" "api=str:$kind" "users=$users" "loops=$LOOPS" "ramp_up_s=$RAMP_UP")
    local bport gport
    bport=$(bench_free_port)
    if ! start_backend "$bport"; then
        bench_row "${row[@]}" "skipped=str:backend: $SERVER_ERROR"
        return
    fi
    local backend_pid=$SERVER_PID
    gport=$(bench_free_port)
    if ! start_gateway "$variant" "$gport" "$bport"; then
        bench_say "$variant $experiment skipped: $SERVER_ERROR"
        bench_row "${row[@]}" "skipped=str:$SERVER_ERROR"
        bench_stop "$backend_pid"
        return
    fi
    local gateway_pid=$SERVER_PID
    local url="http://127.0.0.1:$gport/api/$(style_of "$variant")" load=("$BIN_DIR/sluice-load")
    load+=(--users "$users" --ramp-up "$RAMP_UP" --loops "$LOOPS" --timeout "$CLIENT_TIMEOUT_S" --json --no-progress)
    if [[ $kind == upload ]]; then
        load+=(--upload "$BENCH_TMP/upload.bin" "$url/upload")
    else
        load+=("$url/files")
    fi
    bench_log_cmd "${load[*]}"
    local out="$BENCH_TMP/load-$variant-$kind-$users.json" stop="$BENCH_TMP/stop-$gport"
    sample_max "$gateway_pid" "$stop" >"$BENCH_TMP/max-$gport.json" &
    local sampler=$!
    local cpu0
    cpu0=$(bench_cpu_ticks "$gateway_pid")
    # Bounded: LOOPS requests per user, each at most CLIENT_TIMEOUT_S, plus the ramp-up.
    timeout --kill-after=5 $((RAMP_UP + LOOPS * CLIENT_TIMEOUT_S + 30)) "${load[@]}" >"$out" 2>"$out.err" || true
    local cpu1
    cpu1=$(bench_cpu_ticks "$gateway_pid")
    touch "$stop"
    wait "$sampler" || true
    local backend_stats
    backend_stats=$(curl -s -m 2 "http://127.0.0.1:$bport/stats" || echo '{}')
    echo "$backend_stats" >"$BENCH_TMP/bstats-$gport.json"
    bench_stop "$gateway_pid"
    bench_stop "$backend_pid"
    bench_row "${row[@]}" @"$out" @"$BENCH_TMP/max-$gport.json" "backend=@$BENCH_TMP/bstats-$gport.json" \
        "gateway_cpu_s=$(python3 -c "print(($cpu1 - $cpu0) / $(getconf CLK_TCK))")" "loadavg=str:$(bench_loadavg)"
    bench_say "$variant $kind $users×$LOOPS: avg $(bench_json "$out" avg_ms) ms, errors $(bench_json "$out" error_pct)%" \
        "($(bench_json "$out" errors_by_kind)), $(bench_json "$out" throughput) TPS"
}

main() {
    bench_init s3
    [[ -x $BIN_DIR/sluice-load && -x $BIN_DIR/sluice-gateway && -x $BIN_DIR/sluice-slow-backend ]] ||
        bench_die "sluice-load, sluice-gateway and sluice-slow-backend must be built in $BIN_DIR"
    head -c "$UPLOAD_BYTES" /dev/urandom >"$BENCH_TMP/upload.bin"
    for k in EXPERIMENTS VARIANTS LOOPS RAMP_UP BANDWIDTH_MBIT RESPONSE_TIMEOUT_MS CLIENT_TIMEOUT_S LIMIT \
        LIMIT_WAIT_MS UPLOAD_BYTES THIN; do
        bench_param "$k" "${!k}"
    done
    local experiment variant
    for experiment in $EXPERIMENTS; do
        for variant in $VARIANTS; do
            run_point "$variant" "$experiment"
        done
    done
    bench_note "Errors are the user's (sluice-load's): a 504 from the gateway when its upstream call passed" \
        "RESPONSE_TIMEOUT_MS, a 503 from the limiter after LIMIT_WAIT_MS, a 502 on an upstream failure; by kind in the JSON."
    bench_note "TPS is samples / the run's elapsed time (JMeter's Summary Report throughput), ramp-up included."
    bench_report s3
    local py=python3
    [[ -x /usr/bin/python3 ]] && py=/usr/bin/python3 # Debian's, with python3-matplotlib
    "$py" "$BENCH_DIR/scenarios/s3_report.py" plot "$RESULTS_DIR/s3-$BENCH_STAMP.json" || true
}

main "$@"
