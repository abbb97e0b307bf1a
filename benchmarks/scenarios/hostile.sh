#!/usr/bin/env bash
# Hostile clients (issue 6): per backend, on a fresh sluice-hello each time,
#
#   slowloris  slowhttptest -H: heads that never end (a header line every SHT_INTERVAL s)
#   rudy       slowhttptest -B: POST /echo with Content-Length 8192, the body a few bytes at a time
#   slowread   slowhttptest -X: GET SLOWREAD_PATH (32 KiB answers) x4 pipelined, read 32 bytes
#              every 2 s through a 1..64-byte receive window
#   flood      pipeflood.py: pipelined requests to an async route, always a partial one behind the
#              whole ones and the pipeline never empty (defect 2); server RSS over time
#   churn      ab -n CHURN_N -c CHURN_C (no keep-alive): one short connection per request; RSS and
#              fds before and after
#
# During every step monitor.py probes the server (a fresh connection GET / every 0.5 s, answered
# = a whole 200 within 1 s) and samples its VmRSS / VmHWM / threads / open fds. After an attack
# the runner waits (at most SETTLE_S) for the fds to return to the baseline, then probes once more.
# On blocking, slowloris also runs once per entry of BLOCKING_VARIANTS (one --set each), to show
# how far the header timeout and the accept queue bound it.
#
#   benchmarks/scenarios/hostile.sh                 # full: 10,000 connections, 60 s per attack
#   FAST=1 benchmarks/scenarios/hostile.sh          # a quick check, under 5 min for 3 backends
#   BACKENDS=epoll PHASES="slowloris churn" benchmarks/scenarios/hostile.sh
#
# Environment (defaults; FAST=1 defaults in brackets; FAST=1 took 4.7 min for 3 backends): BACKENDS ("blocking epoll uring"),
# PHASES ("slowloris rudy slowread flood churn"), CONNS (10000 [10000]: slowhttptest connections
# per attack, split over SHT_PROCS (4) processes), ATTACK_S (60 [12]), SHT_INTERVAL (5: seconds
# between follow-up bytes), SETTLE_S (30 [15]), SERVER_SET ("limits.max_connections=19000"),
# BLOCKING_VARIANTS ("limits.header_timeout_ms=5000 limits.header_timeout_ms=2000
# blocking.accept_queue=1000" ["limits.header_timeout_ms=2000"]), SLOWREAD_PATH
# ("/bytes?n=32768"), FLOOD_S (60 [10]), FLOOD_CONNS (16), FLOOD_PATH ("/delay?ms=1"), FLOOD_SET
# (""; e.g. "dispatch=pool" with FLOOD_PATH=/), CHURN_N (1000000 [50000]), CHURN_C (50),
# CHURN_TIMEOUT_S (600 [90]), SERVER_NICE (-5 as root, else 0: the server's and the probe's nice;
# the attack tools run at the caller's).
#
# Limits of this host, which bound the figures: the fd limit is 20,000 per process (the server
# holds one fd per connection, slowhttptest one per connection too), so CONNS stays at 10,000 and
# the server runs with limits.max_connections=19000 (its default, 10,000, would let the attack's
# connections alone fill the table); somaxconn is 4096 (the listen backlog: connections the
# server has not accepted yet wait there, and beyond it the kernel drops SYNs).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FAST=${FAST:-0}
fast() { [[ $FAST == 1 ]] && echo "$2" || echo "$1"; }
BACKENDS=${BACKENDS:-"blocking epoll uring"}
PHASES=${PHASES:-"slowloris rudy slowread flood churn"}
CONNS=${CONNS:-10000}
SHT_PROCS=${SHT_PROCS:-4}
ATTACK_S=${ATTACK_S:-$(fast 60 12)}
SHT_INTERVAL=${SHT_INTERVAL:-5}
SETTLE_S=${SETTLE_S:-$(fast 30 15)}
SERVER_SET=${SERVER_SET:-"limits.max_connections=19000"}
BLOCKING_VARIANTS=${BLOCKING_VARIANTS:-$(fast "limits.header_timeout_ms=5000 limits.header_timeout_ms=2000 blocking.accept_queue=1000" "limits.header_timeout_ms=2000")}
SLOWREAD_PATH=${SLOWREAD_PATH:-"/bytes?n=32768"}
FLOOD_S=${FLOOD_S:-$(fast 60 10)}
FLOOD_CONNS=${FLOOD_CONNS:-16}
FLOOD_PATH=${FLOOD_PATH:-"/delay?ms=1"}
FLOOD_SET=${FLOOD_SET:-}
CHURN_N=${CHURN_N:-$(fast 1000000 50000)}
CHURN_C=${CHURN_C:-50}
CHURN_TIMEOUT_S=${CHURN_TIMEOUT_S:-$(fast 600 90)}
# The attackers share the server's 2 CPUs here (with other sessions' builds at nice 5-10): the
# server and the probe run at SERVER_NICE so that the probe measures the server, not the host.
if [[ -z ${SERVER_NICE+x} ]]; then
    SERVER_NICE=$([[ $(id -u) == 0 ]] && echo -5 || echo 0)
fi
export BENCH_NICE=$SERVER_NICE
MONITOR="$BENCH_DIR/scenarios/monitor.py"
PIPEFLOOD="$BENCH_DIR/scenarios/pipeflood.py"

# start_server BACKEND LOG [KEY=VALUE...] -> SERVER_PID, PORT, URL, SERVER_CMD
start_server() {
    local backend=$1 log=$2 kv args=()
    shift 2
    for kv in log_level=warn $SERVER_SET "$@"; do
        args+=(--set "$kv")
    done
    PORT=$(bench_free_port)
    URL="http://127.0.0.1:$PORT"
    bench_start_sluice "$log" "$PORT" --backend "$backend" "${args[@]}" || return 1
    bench_healthy "$URL/" || true # first-use allocations are not the attack's
    sleep 0.5
}

# stop_server: SIGTERM; STOP_S = seconds to exit, STOP_CLEAN = false if it had to be killed.
stop_server() {
    local t0=$SECONDS
    STOP_CLEAN=true
    if bench_alive "$SERVER_PID"; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        bench_wait_exit "$SERVER_PID" 15 || STOP_CLEAN=false
    fi
    STOP_S=$((SECONDS - t0))
    $STOP_CLEAN || bench_say "pid $SERVER_PID did not exit within 15 s of SIGTERM: SIGKILL"
    bench_stop "$SERVER_PID" 1
    wait "$SERVER_PID" 2>/dev/null || true
    bench_forget "$SERVER_PID"
}

# start_monitor OUT DURATION_S [--no-probe] -> MONITOR_PID
start_monitor() {
    local out=$1 duration=$2
    shift 2
    nice -n "$SERVER_NICE" python3 "$MONITOR" --pid "$SERVER_PID" --port "$PORT" --duration "$duration" "$@" \
        >"$out" 2>"$out.err" &
    MONITOR_PID=$!
    STARTED_PIDS+=("$MONITOR_PID")
}

stop_monitor() {
    kill -TERM "$MONITOR_PID" 2>/dev/null || true
    bench_wait_exit "$MONITOR_PID" 10 || bench_stop "$MONITOR_PID" 1
    wait "$MONITOR_PID" 2>/dev/null || true
    bench_forget "$MONITOR_PID"
}

# Waits (at most SETTLE_S) until the server's fds are back to FDS0; sets FDS_AFTER, RETURN_S.
wait_fds_return() {
    local fds0=$1 t0=$SECONDS tenths=$((SETTLE_S * 10))
    FDS_AFTER=$(bench_fds "$SERVER_PID")
    while ((FDS_AFTER > fds0 && tenths-- > 0)) && bench_alive "$SERVER_PID"; do
        sleep 0.1
        FDS_AFTER=$(bench_fds "$SERVER_PID")
    done
    RETURN_S=$((SECONDS - t0))
}

sht_args() {
    local attack=$1 per=$2
    local common=(-c "$per" -r "$per" -l "$ATTACK_S" -p 1 -g)
    case $attack in
    slowloris) echo "-H -i $SHT_INTERVAL -x 24 ${common[*]} -u $URL/" ;;
    rudy) echo "-B -i $SHT_INTERVAL -x 24 -s 8192 ${common[*]} -u $URL/echo" ;;
    slowread) echo "-X -k 4 -n 2 -w 1 -y 64 -z 32 ${common[*]} -u $URL$SLOWREAD_PATH" ;;
    esac
}

# attack BACKEND ATTACK [KEY=VALUE]: one slowhttptest attack on a fresh server, one result row.
attack() {
    local backend=$1 name=$2 variant=${3:-} tag="$1-$2${3:+-${3//[^a-z0-9]/_}}"
    local row=("phase=str:attack" "backend=str:$backend" "attack=str:$name" "variant=str:${variant:-default}"
        "connections=$CONNS")
    if ! start_server "$backend" "$BENCH_TMP/$tag.log" ${variant:+"$variant"}; then
        bench_say "$tag skipped: $SERVER_ERROR"
        bench_row "${row[@]}" "skipped=str:$SERVER_ERROR"
        return
    fi
    local rss0 fds0 threads0
    rss0=$(bench_rss_kib "$SERVER_PID")
    fds0=$(bench_fds "$SERVER_PID")
    threads0=$(bench_threads "$SERVER_PID")
    local mon="$BENCH_TMP/$tag.monitor.json" per=$((CONNS / SHT_PROCS)) i pids=() args t0=$SECONDS
    start_monitor "$mon" $((ATTACK_S + 60))
    args=$(sht_args "$name" "$per")
    bench_log_cmd "$SHT_PROCS x slowhttptest $args -o <tmp>/$tag.<i>"
    for ((i = 0; i < SHT_PROCS; i++)); do
        # shellcheck disable=SC2086 # args is a word list on purpose
        timeout --kill-after=5 $((ATTACK_S + 30)) slowhttptest $args -o "$BENCH_TMP/$tag.$i" \
            >"$BENCH_TMP/$tag.$i.out" 2>&1 &
        pids+=($!)
        STARTED_PIDS+=("$!")
    done
    for i in "${pids[@]}"; do
        wait "$i" 2>/dev/null || true
        bench_forget "$i"
    done
    local attack_s=$((SECONDS - t0))
    stop_monitor
    wait_fds_return "$fds0"
    local healthy=false alive=false rss_after
    rss_after=$(bench_rss_kib "$SERVER_PID")
    bench_alive "$SERVER_PID" && alive=true
    $alive && bench_healthy "$URL/" && healthy=true
    stop_server
    python3 "$BENCHLIB" sht-summary "$BENCH_TMP/$tag" "$SHT_PROCS" >"$BENCH_TMP/$tag.client.json"
    bench_row "${row[@]}" "rss_base_kib=$rss0" "fds_base=$fds0" "threads_base=$threads0" \
        "attack_s=$attack_s" "fds_after=$FDS_AFTER" "fds_return_s=$RETURN_S" "rss_after_kib=$rss_after" \
        "server_alive=$alive" "healthy_after=$healthy" "stop_clean=$STOP_CLEAN" "stop_s=$STOP_S" \
        "client=@$BENCH_TMP/$tag.client.json" "monitor=@$mon"
    bench_say "$tag: $(python3 "$BENCHLIB" hostile-line "$BENCH_TMP/rows.jsonl")"
}

flood() {
    local backend=$1 tag="$1-flood" row=("phase=str:flood" "backend=str:$1" "path=str:$FLOOD_PATH"
        "set=str:${FLOOD_SET:-}")
    if ! start_server "$backend" "$BENCH_TMP/$tag.log" ${FLOOD_SET:+"$FLOOD_SET"}; then
        bench_row "${row[@]}" "skipped=str:$SERVER_ERROR"
        return
    fi
    local rss0 fds0 mon="$BENCH_TMP/$tag.monitor.json" out="$BENCH_TMP/$tag.json"
    rss0=$(bench_rss_kib "$SERVER_PID")
    fds0=$(bench_fds "$SERVER_PID")
    start_monitor "$mon" $((FLOOD_S + 60))
    local cmd=(python3 "$PIPEFLOOD" --port "$PORT" --duration "$FLOOD_S" --connections "$FLOOD_CONNS"
        --path "$FLOOD_PATH" --server-pid "$SERVER_PID")
    bench_log_cmd "${cmd[*]}"
    timeout --kill-after=5 $((FLOOD_S + 30)) "${cmd[@]}" >"$out" 2>"$out.err" || true
    stop_monitor
    wait_fds_return "$fds0"
    local rss_after healthy=false
    rss_after=$(bench_rss_kib "$SERVER_PID")
    bench_alive "$SERVER_PID" && bench_healthy "$URL/" && healthy=true
    stop_server
    bench_row "${row[@]}" "rss_base_kib=$rss0" "rss_after_kib=$rss_after" \
        "fds_base=$fds0" "fds_after=$FDS_AFTER" "healthy_after=$healthy" "stop_clean=$STOP_CLEAN" \
        "client=@$out" "monitor=@$mon"
    bench_say "$tag: $(python3 "$BENCHLIB" hostile-line "$BENCH_TMP/rows.jsonl")"
}

churn() {
    local backend=$1 tag="$1-churn" row=("phase=str:churn" "backend=str:$1" "n=$CHURN_N" "c=$CHURN_C")
    if ! start_server "$backend" "$BENCH_TMP/$tag.log"; then
        bench_row "${row[@]}" "skipped=str:$SERVER_ERROR"
        return
    fi
    # Warm up (allocator arenas, buffer pools, the blocking backend's threads), then the baseline.
    timeout 60 ab -q -r -s 5 -n 5000 -c "$CHURN_C" "$URL/" >/dev/null 2>&1 || true
    sleep 1
    local rss0 fds0 mon="$BENCH_TMP/$tag.monitor.json" out="$BENCH_TMP/$tag.ab" t0=$SECONDS
    rss0=$(bench_rss_kib "$SERVER_PID")
    fds0=$(bench_fds "$SERVER_PID")
    start_monitor "$mon" $((CHURN_TIMEOUT_S + 60))
    local cmd=(ab -q -r -s 5 -n "$CHURN_N" -c "$CHURN_C" "$URL/")
    bench_log_cmd "${cmd[*]}"
    # SIGINT: ab prints what it did so far.
    timeout -s INT --kill-after=10 "$CHURN_TIMEOUT_S" "${cmd[@]}" >"$out" 2>&1 || true
    local churn_s=$((SECONDS - t0))
    stop_monitor
    wait_fds_return "$fds0"
    sleep 1
    local rss_after healthy=false
    rss_after=$(bench_rss_kib "$SERVER_PID")
    bench_alive "$SERVER_PID" && bench_healthy "$URL/" && healthy=true
    stop_server
    python3 "$BENCHLIB" parse-ab "$out" >"$out.json"
    bench_row "${row[@]}" "rss_base_kib=$rss0" "rss_after_kib=$rss_after" "fds_base=$fds0" \
        "fds_after=$FDS_AFTER" "churn_s=$churn_s" "healthy_after=$healthy" "stop_clean=$STOP_CLEAN" \
        "client=@$out.json" "monitor=@$mon"
    bench_say "$tag: $(python3 "$BENCHLIB" hostile-line "$BENCH_TMP/rows.jsonl")"
}

main() {
    bench_init hostile
    command -v slowhttptest >/dev/null || bench_die "slowhttptest not found (scripts/bootstrap installs it)"
    command -v ab >/dev/null || bench_die "ab not found (apache2-utils; scripts/bootstrap installs it)"
    for k in FAST SERVER_NICE BACKENDS PHASES CONNS SHT_PROCS ATTACK_S SHT_INTERVAL SETTLE_S SERVER_SET BLOCKING_VARIANTS \
        SLOWREAD_PATH FLOOD_S FLOOD_CONNS FLOOD_PATH FLOOD_SET CHURN_N CHURN_C CHURN_TIMEOUT_S; do
        bench_param "$k" "${!k}"
    done
    local b p v
    for b in $BACKENDS; do
        for p in $PHASES; do
            case $p in
            slowloris | rudy | slowread) attack "$b" "$p" ;;
            flood) flood "$b" ;;
            churn) churn "$b" ;;
            *) bench_die "unknown phase $p" ;;
            esac
            if [[ $p == slowloris && $b == blocking ]]; then
                for v in $BLOCKING_VARIANTS; do
                    attack "$b" slowloris "$v"
                done
            fi
        done
    done
    bench_note "Server: sluice-hello --set log_level=warn --set $SERVER_SET (+ the variant), a fresh process per" \
        "row. Defaults otherwise: header_timeout 10 s, body_timeout 30 s, idle_timeout 60 s, write_timeout 30 s;" \
        "blocking: 200 threads, accept_queue 100."
    bench_note "Probe: a fresh connection GET / every 0.5 s during the attack (monitor.py); answered = a whole 200" \
        "within 1 s of the connect. 'available' = every probe answered. Worst = the slowest probe, an unanswered" \
        "one counted at its full wait."
    bench_note "Held = peak server fds - baseline (connections the server accepted and kept; the blocking backend's" \
        "queued ones included). Client peak = slowhttptest's own 'connected' count, summed over its processes" \
        "(it also counts connections still in the listen backlog, which somaxconn 4096 bounds)."
    bench_note "fds back = the server's fds equal the baseline within SETTLE_S = $SETTLE_S s after the attack ended."
    bench_note "RSS is user memory (VmRSS, peak of samples every 0.5 s; HWM = VmHWM); kernel socket buffers are not in it."
    bench_report hostile
}

main "$@"
