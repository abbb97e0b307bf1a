#!/usr/bin/env bash
# S4 (SCENARIOS.md, seed 002): one gateway instance at 1.5 CPU against three replicas at 0.5
# CPU each, behind haproxy (deploy/haproxy/haproxy.cfg: round robin, health checks on the admin
# listener's /readyz, retries with redispatch); uploads guarded by 50 permits per instance
# (--limit 50 --limit-routes upload: the seed's Semaphore(50)), reads unguarded; then a rolling
# restart of the three under load.
#
#   sluice-load -> haproxy -> N × sluice-gateway (cgroup v1 cpu.cfs_quota_us) -> sluice-slow-backend
#
# The upstream is one sluice-slow-backend for every instance: the object store behind one
# uplink of BANDWIDTH_MBIT shared fairly by the uploads in progress (S3's THIN model: 7 Mbit/s
# is the seed-000 author's measured uplink, docs/results.md S3). haproxy, the backend and the
# load generator run outside the quotas (the seed's JMeter, kube-proxy and S3 were outside
# the pods' limits too).
#
#   benchmarks/scenarios/s4.sh            # uploads 20/50/80 × 5, reads 200/500/800 for READ_S, rolls: ~15 min
#   FAST=1 benchmarks/scenarios/s4.sh     # uploads 80 × 5 (waiter timeout 1 s), reads 500 for 8 s, rolls: ~5 min
#   EXPERIMENTS="upload:80" TOPOLOGIES=one ROLL=0 benchmarks/scenarios/s4.sh
#
# Topologies: one   1 gateway, ONE_CPU CPUs (cfs_quota_us = ONE_CPU × period), io threads = ⌈ONE_CPU⌉
#             three 3 gateways, SMALL_CPU CPUs each, io threads = ⌈SMALL_CPU⌉
# (an instance gets as many loops as its quota has whole CPUs, rounded up, as a JVM or Go
# runtime sizes itself from the quota), both behind the same haproxy.
# Experiments: upload:USERS[:WAIT_MS] (USERS × LOOPS POSTs of UPLOAD_BYTES, ramp-up RAMP_UP;
# WAIT_MS the waiter timeout instead of LIMIT_WAIT_MS: the seed does not give its own) and
# read:USERS (GET /files for READ_S seconds, ramp-up RAMP_UP: a duration, so that TPS is a
# steady figure; the seed ran 5 loops).
# ROLL=1: the three under ROLL_READ_USERS readers and ROLL_UPLOAD_USERS uploaders for ROLL_S
# seconds; after ROLL_WARM_S each instance in turn gets SIGTERM (it drains: /readyz 503 at once,
# listeners closed, requests in progress finish), is waited for, started again on the same
# ports, and the next one waits until haproxy has it UP again. Every failed request counts.
# Once per ROLL_MODES: sigterm (SIGTERM alone), drain (first haproxy's `set server ... state
# drain` and a wait until it has nothing in progress there: Kubernetes' preStop step) and delay
# (SIGTERM alone, the gateways started with shutdown_delay_ms=SHUTDOWN_DELAY_MS: they go on
# serving with /readyz at 503 until haproxy's health check has taken them out).
# Environment (defaults): EXPERIMENTS, TOPOLOGIES ("one three"), LOOPS (5), RAMP_UP (5),
# READ_S (20; FAST 8), BANDWIDTH_MBIT (7), LIMIT (50), LIMIT_QUEUE (1000), LIMIT_WAIT_MS (5000:
# the gateway's default), RESPONSE_TIMEOUT_MS (30000), CLIENT_TIMEOUT_S (60), UPLOAD_BYTES
# (75776), ONE_CPU (1.5), SMALL_CPU (0.5), ROLL (1), ROLL_S (40; FAST 30), ROLL_WARM_S (4),
# ROLL_READ_USERS (100), ROLL_UPLOAD_USERS (20), ROLL_MODES ("sigterm drain delay"), SHUTDOWN_TIMEOUT_MS
# (15000), SHUTDOWN_DELAY_MS (2000: above haproxy's inter 500ms × fall 2 plus a check's own time).
# Needs root (cgroup v1 cpu controller at /sys/fs/cgroup/cpu, writable) and haproxy
# (scripts/bootstrap installs it). The cgroups are /sys/fs/cgroup/cpu/sluice-s4-<pid>-*, removed
# at exit.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FAST=${FAST:-0}
if [[ $FAST == 1 ]]; then
    EXPERIMENTS=${EXPERIMENTS-"upload:80:1000 read:500"}
    READ_S=${READ_S:-8}
    ROLL_S=${ROLL_S:-30}
else
    EXPERIMENTS=${EXPERIMENTS-"upload:20 upload:50 upload:80 upload:80:2000 upload:80:1000 read:200 read:500 read:800"}
    READ_S=${READ_S:-20}
    ROLL_S=${ROLL_S:-40}
fi
TOPOLOGIES=${TOPOLOGIES:-"one three"}
LOOPS=${LOOPS:-5}
RAMP_UP=${RAMP_UP:-5}
BANDWIDTH_MBIT=${BANDWIDTH_MBIT:-7}
LIMIT=${LIMIT:-50}
LIMIT_QUEUE=${LIMIT_QUEUE:-1000}
LIMIT_WAIT_MS=${LIMIT_WAIT_MS:-5000}
RESPONSE_TIMEOUT_MS=${RESPONSE_TIMEOUT_MS:-30000}
CLIENT_TIMEOUT_S=${CLIENT_TIMEOUT_S:-60}
UPLOAD_BYTES=${UPLOAD_BYTES:-75776}
ONE_CPU=${ONE_CPU:-1.5}
SMALL_CPU=${SMALL_CPU:-0.5}
ROLL=${ROLL:-1}
ROLL_MODES=${ROLL_MODES:-"sigterm drain delay"}
ROLL_WARM_S=${ROLL_WARM_S:-4}
ROLL_READ_USERS=${ROLL_READ_USERS:-100}
ROLL_UPLOAD_USERS=${ROLL_UPLOAD_USERS:-20}
SHUTDOWN_TIMEOUT_MS=${SHUTDOWN_TIMEOUT_MS:-15000}
SHUTDOWN_DELAY_MS=${SHUTDOWN_DELAY_MS:-2000}
GW_DELAY_MS=0 # shutdown_delay_ms of the gateways started now (the delay roll mode sets it)

CG_ROOT=/sys/fs/cgroup/cpu
CGROUPS=()
HAPROXY_CFG="$REPO_ROOT/deploy/haproxy/haproxy.cfg"

# --- cgroups -----------------------------------------------------------------------------------

# cg_create NAME CPUS -> CG (a new cgroup whose quota is CPUS × its period).
cg_create() {
    CG="$CG_ROOT/sluice-s4-$$-$1"
    mkdir "$CG"
    CGROUPS+=("$CG")
    local period quota
    period=$(cat "$CG/cpu.cfs_period_us")
    quota=$(python3 -c "print(round($2 * $period))")
    echo "$quota" >"$CG/cpu.cfs_quota_us"
}

# Removes every cgroup we made; each must be empty (its processes stopped first). Bounded.
cg_remove_all() {
    local cg tries
    for cg in "${CGROUPS[@]+"${CGROUPS[@]}"}"; do
        tries=50
        while [[ -d $cg ]] && ((tries-- > 0)); do
            rmdir "$cg" 2>/dev/null || sleep 0.1
        done
        [[ -d $cg ]] && bench_say "could not remove $cg (processes: $(tr '\n' ' ' <"$cg/cgroup.procs"))"
    done
    CGROUPS=()
}

# nr_throttled and throttled_time (ns) summed over the cgroups given, as JSON.
cg_throttled() {
    python3 - "$@" <<'EOF'
import json, sys
n = t = p = 0
for cg in sys.argv[1:]:
    stat = dict(line.split() for line in open(cg + "/cpu.stat", encoding="utf-8"))
    n += int(stat.get("nr_throttled", 0)); t += int(stat.get("throttled_time", 0)); p += int(stat.get("nr_periods", 0))
print(json.dumps({"nr_periods": p, "nr_throttled": n, "throttled_s": round(t / 1e9, 3)}))
EOF
}

s4_cleanup() {
    local rc=$? pid
    for pid in "${STARTED_PIDS[@]+"${STARTED_PIDS[@]}"}"; do
        bench_stop "$pid" 5
    done
    cg_remove_all
    (exit "$rc")
    bench_cleanup
}

# --- processes ---------------------------------------------------------------------------------

start_backend() {
    BPORT=$(bench_free_port)
    bench_start_app sluice-slow-backend "$BENCH_TMP/backend-$BPORT.log" "$BPORT" --backend epoll --io-threads 1 \
        --bandwidth-mbit "$BANDWIDTH_MBIT" --set log_level=warn --set limits.max_connections=20000 \
        --set limits.max_body_bytes=1048576 || bench_die "backend: $SERVER_ERROR"
    BACKEND_PID=$SERVER_PID
}

# start_gateway I: instance I on GW_PORT[I] / GW_ADMIN[I], in cgroup GW_CG[I], with GW_THREADS loops.
start_gateway() {
    local i=$1
    BENCH_CGROUP=${GW_CG[$i]} bench_start_app sluice-gateway "$BENCH_TMP/gateway-$i-${GW_PORT[$i]}.log" \
        "${GW_PORT[$i]}" --upstream "127.0.0.1:$BPORT" --backend epoll --io-threads "$GW_THREADS" \
        --pool-size 100 --response-timeout-ms "$RESPONSE_TIMEOUT_MS" --limit "$LIMIT" --limit-queue "$LIMIT_QUEUE" \
        --limit-wait-ms "$LIMIT_WAIT_MS" --limit-routes upload --set "admin.listen=127.0.0.1:${GW_ADMIN[$i]}" \
        --set log_level=warn --set limits.max_connections=20000 --set limits.max_body_bytes=1048576 \
        --set "shutdown_timeout_ms=$SHUTDOWN_TIMEOUT_MS" --set "shutdown_delay_ms=$GW_DELAY_MS" || return 1
    GW_PID[i]=$SERVER_PID
}

# 0 once GET URL answers 200 (bounded by SECONDS_MAX).
wait_200() {
    local url=$1 tenths=$((${2:-10} * 10))
    while ((tenths-- > 0)); do
        bench_healthy "$url" && return 0
        sleep 0.1
    done
    return 1
}

# A command on haproxy's runtime API (the admin socket); prints its answer.
haproxy_api() {
    python3 - "$HAPROXY_SOCK" "$1" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(2)
s.connect(sys.argv[1])
s.sendall((sys.argv[2] + "\n").encode())
out = b""
while chunk := s.recv(65536):
    out += chunk
print(out.decode().strip())
EOF
}

# Requests haproxy has in progress on server NAME (scur).
haproxy_current() {
    haproxy_csv | awk -F, -v s="$1" '$1 == "gateways" && $2 == s { print $5 }'
}

haproxy_csv() {
    curl -s -m 2 "http://127.0.0.1:$STATS_PORT/stats;csv" || true
}

# The status haproxy gives server NAME of backend gateways (UP, DOWN, "UP 1/2", ...).
haproxy_status() {
    haproxy_csv | awk -F, -v s="$1" '$1 == "gateways" && $2 == s { print $18 }'
}

wait_haproxy_up() {
    local name=$1 tenths=$((${2:-20} * 10))
    while ((tenths-- > 0)); do
        [[ $(haproxy_status "$name") == UP ]] && return 0
        sleep 0.1
    done
    return 1
}

# haproxy's totals for backend gateways as JSON: retries, redispatches, 5xx it answered itself
# or passed on, connection errors, and each server's downtime.
haproxy_totals() {
    haproxy_csv | python3 -c '
import csv, json, sys
rows = list(csv.DictReader(line.lstrip("# ") if i == 0 else line for i, line in enumerate(sys.stdin)))
be = next((r for r in rows if r.get("pxname") == "gateways" and r.get("svname") == "BACKEND"), {})
num = lambda r, k: int(r.get(k) or 0)
print(json.dumps({"lb_retries": num(be, "wretr"), "lb_redispatches": num(be, "wredis"),
                  "lb_5xx": num(be, "hrsp_5xx"), "lb_econ": num(be, "econ"), "lb_eresp": num(be, "eresp"),
                  "lb_requests": num(be, "stot")}))'
}

# Writes the config: deploy/haproxy/haproxy.cfg with our ports and servers, nothing else changed.
write_haproxy_cfg() {
    local out=$1 n=$2 i servers=""
    for ((i = 1; i <= n; i++)); do
        servers+="    server g$i 127.0.0.1:${GW_PORT[$i]} check port ${GW_ADMIN[$i]}"$'\n'
    done
    python3 - "$HAPROXY_CFG" "$out" "$FRONT_PORT" "$STATS_PORT" "$servers" "$HAPROXY_SOCK" <<'EOF'
import re, sys
src, out, front, stats, servers, sock = sys.argv[1:]
text = open(src, encoding="utf-8").read()
text, n0 = re.subn(r"(\n    stats socket )\S+", rf"\g<1>{sock}", text)
text, n1 = re.subn(r"(frontend api\n    bind )127\.0\.0\.1:\d+", rf"\g<1>127.0.0.1:{front}", text)
text, n2 = re.subn(r"(listen stats\n    bind )127\.0\.0\.1:\d+", rf"\g<1>127.0.0.1:{stats}", text)
text, n3 = re.subn(r"(    # BEGIN servers[^\n]*\n).*?(    # END servers)", lambda m: m.group(1) + servers + m.group(2),
                   text, flags=re.S)
assert n0 == n1 == n2 == n3 == 1, "deploy/haproxy/haproxy.cfg lost a bind, the socket or the server markers"
open(out, "w", encoding="utf-8").write(text)
EOF
}

start_haproxy() {
    local n=$1 cfg="$BENCH_TMP/haproxy-$1.cfg"
    FRONT_PORT=$(bench_free_port)
    STATS_PORT=$(bench_free_port)
    HAPROXY_SOCK="$BENCH_TMP/haproxy-$n.sock"
    write_haproxy_cfg "$cfg" "$n"
    haproxy -c -q -f "$cfg" || bench_die "haproxy rejects $cfg"
    local cmd=(haproxy -db -f "$cfg")
    bench_log_cmd "${cmd[*]}   # deploy/haproxy/haproxy.cfg, $n servers"
    "${cmd[@]}" >"$BENCH_TMP/haproxy-$n.log" 2>&1 &
    HAPROXY_PID=$!
    STARTED_PIDS+=("$HAPROXY_PID")
    bench_wait_port "$FRONT_PORT" "$HAPROXY_PID" 10 || bench_die "haproxy did not start: $(tail -n 3 "$BENCH_TMP/haproxy-$n.log")"
    for ((i = 1; i <= n; i++)); do
        wait_haproxy_up "g$i" 20 || bench_die "haproxy never saw g$i UP"
    done
}

# up TOPOLOGY: backend, the gateways in their cgroups, haproxy; N, CPUS set.
up() {
    local topology=$1 i
    case $topology in
    one) N=1 CPUS=$ONE_CPU ;;
    three) N=3 CPUS=$SMALL_CPU ;;
    *) bench_die "unknown topology $topology (one|three)" ;;
    esac
    GW_THREADS=$(python3 -c "import math; print(max(1, math.ceil($CPUS)))")
    start_backend
    GW_PORT=() GW_ADMIN=() GW_CG=() GW_PID=()
    for ((i = 1; i <= N; i++)); do
        GW_PORT[i]=$(bench_free_port)
        GW_ADMIN[i]=$(bench_free_port)
        cg_create "$topology-$i" "$CPUS"
        GW_CG[i]=$CG
        start_gateway "$i" || bench_die "gateway $i: $SERVER_ERROR"
        wait_200 "http://127.0.0.1:${GW_ADMIN[$i]}/readyz" 10 || bench_die "gateway $i never ready"
    done
    start_haproxy "$N"
}

down() {
    local i
    bench_stop "$HAPROXY_PID"
    for ((i = 1; i <= N; i++)); do
        bench_stop "${GW_PID[$i]}" 20
    done
    bench_stop "$BACKEND_PID"
    cg_remove_all
}

# Limiter counters summed over the instances' /metrics: waiters that timed out, rejected.
limiter_totals() {
    local i urls=()
    for ((i = 1; i <= N; i++)); do
        urls+=("http://127.0.0.1:${GW_ADMIN[$i]}/metrics")
    done
    python3 - "${urls[@]}" <<'EOF'
import json, re, sys, urllib.request
tot = {"limiter_timed_out": 0, "limiter_rejected": 0, "limiter_granted": 0}
for url in sys.argv[1:]:
    try:
        text = urllib.request.urlopen(url, timeout=2).read().decode()
    except OSError:
        continue
    for key, name in (("limiter_timed_out", "timed_out"), ("limiter_rejected", "rejected"), ("limiter_granted", "granted")):
        m = re.search(rf'^sluice_limiter_{name}_total{{limiter="gateway"}} (\S+)$', text, re.M)
        tot[key] += int(float(m.group(1))) if m else 0
print(json.dumps(tot))
EOF
}

gateway_cpu_s() {
    local t
    t=$(bench_cpu_ticks "${GW_PID[@]:1}")
    python3 -c "print(round($t / $(getconf CLK_TCK), 2))"
}

# load_cmd KIND USERS -> LOAD (the sluice-load command through haproxy)
load_cmd() {
    local kind=$1 users=$2 url="http://127.0.0.1:$FRONT_PORT/api/async"
    LOAD=("$BIN_DIR/sluice-load" --users "$users" --timeout "$CLIENT_TIMEOUT_S" --json --no-progress)
    case $kind in
    upload) LOAD+=(--ramp-up "$RAMP_UP" --loops "$LOOPS" --label "POST upload" --upload "$BENCH_TMP/upload.bin" "$url/upload") ;;
    read) LOAD+=(--ramp-up "$RAMP_UP" --duration "$((RAMP_UP + READ_S))" --label "GET files" "$url/files") ;;
    roll-upload) LOAD+=(--ramp-up 1 --duration "$ROLL_S" --label "POST upload" --upload "$BENCH_TMP/upload.bin" "$url/upload") ;;
    roll-read) LOAD+=(--ramp-up 1 --duration "$ROLL_S" --label "GET files" "$url/files") ;;
    esac
    bench_log_cmd "${LOAD[*]}"
}

run_point() {
    local topology=$1 experiment=$2 kind users wait
    IFS=: read -r kind users wait <<<"$experiment"
    local LIMIT_WAIT_MS=${wait:-$LIMIT_WAIT_MS} # upload:USERS:WAIT_MS: this point's waiter timeout
    up "$topology"
    load_cmd "$kind" "$users"
    local out="$BENCH_TMP/load-$topology-$kind-$users.json" cpu0 cpu1
    cpu0=$(gateway_cpu_s)
    # Bounded: the loops at most CLIENT_TIMEOUT_S each, or the duration, plus the ramp-up.
    timeout --kill-after=5 $((RAMP_UP + LOOPS * CLIENT_TIMEOUT_S + READ_S + 30)) "${LOAD[@]}" >"$out" 2>"$out.err" || true
    cpu1=$(gateway_cpu_s)
    haproxy_totals >"$BENCH_TMP/lb.json"
    limiter_totals >"$BENCH_TMP/lim.json"
    cg_throttled "${GW_CG[@]:1}" >"$BENCH_TMP/thr.json"
    curl -s -m 2 "http://127.0.0.1:$BPORT/stats" >"$BENCH_TMP/bstats.json" || echo '{}' >"$BENCH_TMP/bstats.json"
    down
    bench_row "topology=str:$topology" "instances=$N" "cpus_each=$CPUS" "io_threads=$GW_THREADS" "api=str:$kind" \
        "users=$users" "limit_wait_ms=$LIMIT_WAIT_MS" "loops=$([[ $kind == upload ]] && echo "$LOOPS" || echo 0)" \
        "duration_s=$([[ $kind == read ]] && echo "$READ_S" || echo 0)" @"$out" @"$BENCH_TMP/lb.json" \
        @"$BENCH_TMP/lim.json" "throttling=@$BENCH_TMP/thr.json" "backend=@$BENCH_TMP/bstats.json" \
        "gateway_cpu_s=$(python3 -c "print(round($cpu1 - $cpu0, 2))")" "loadavg=str:$(bench_loadavg)"
    bench_say "$topology $kind $users (wait $LIMIT_WAIT_MS ms): avg $(bench_json "$out" avg_ms) ms, errors $(bench_json "$out" error_pct)%" \
        "($(bench_json "$out" errors_by_kind)), $(bench_json "$out" throughput) TPS"
}

# restart I: with ROLL_MODE=drain first the preStop step (haproxy's runtime API: `set server
# gateways/gI state drain`, then wait until haproxy has no request in progress on it); then
# SIGTERM, wait for the exit (the instance's own drain), start it again on the same ports, wait
# for /readyz, put it back (`state ready`) and wait for haproxy's UP. ROLL_MODE=sigterm skips the
# preStop step: the instance's listeners close while haproxy still sends to it. ROLL_MODE=delay
# skips it too, but the instance serves for shutdown_delay_ms after SIGTERM with /readyz at 503.
restart() {
    local i=$1 pid=${GW_PID[$1]} t0 tp t1 t2 t3 rc=0 tenths
    t0=$(date +%s.%N)
    if [[ $ROLL_MODE == drain ]]; then
        haproxy_api "set server gateways/g$i state drain" >/dev/null
        tenths=$((SHUTDOWN_TIMEOUT_MS / 100))
        while (($(haproxy_current "g$i") > 0)) && ((tenths-- > 0)); do
            sleep 0.1
        done
    fi
    tp=$(date +%s.%N)
    kill -TERM "$pid"
    bench_wait_exit "$pid" $(((GW_DELAY_MS + SHUTDOWN_TIMEOUT_MS) / 1000 + 10)) || bench_die "gateway $i did not exit after SIGTERM"
    wait "$pid" || rc=$?
    bench_forget "$pid"
    t1=$(date +%s.%N)
    start_gateway "$i" || bench_die "gateway $i did not restart: $SERVER_ERROR"
    wait_200 "http://127.0.0.1:${GW_ADMIN[$i]}/readyz" 10 || bench_die "gateway $i not ready after restart"
    t2=$(date +%s.%N)
    if [[ $ROLL_MODE == drain ]]; then
        haproxy_api "set server gateways/g$i state ready" >/dev/null
    fi
    wait_haproxy_up "g$i" 20 || bench_die "haproxy did not put g$i back"
    t3=$(date +%s.%N)
    python3 -c "import json; print(json.dumps({'instance': $i, 'exit_code': $rc, 'lb_drain_s': round($tp - $t0, 2),
        'drain_s': round($t1 - $tp, 2), 'ready_s': round($t2 - $t1, 2), 'lb_up_s': round($t3 - $t2, 2)}))"
}

run_roll() {
    ROLL_MODE=$1
    GW_DELAY_MS=0
    if [[ $ROLL_MODE == delay ]]; then
        GW_DELAY_MS=$SHUTDOWN_DELAY_MS
    fi
    up three
    load_cmd roll-read "$ROLL_READ_USERS"
    local reads=("${LOAD[@]}")
    load_cmd roll-upload "$ROLL_UPLOAD_USERS"
    local uploads=("${LOAD[@]}") r_out="$BENCH_TMP/roll-read.json" u_out="$BENCH_TMP/roll-upload.json"
    timeout --kill-after=5 $((ROLL_S + CLIENT_TIMEOUT_S + 30)) "${reads[@]}" >"$r_out" 2>"$r_out.err" &
    local rpid=$!
    timeout --kill-after=5 $((ROLL_S + CLIENT_TIMEOUT_S + 30)) "${uploads[@]}" >"$u_out" 2>"$u_out.err" &
    local upid=$!
    local start
    start=$(date +%s)
    sleep "$ROLL_WARM_S"
    : >"$BENCH_TMP/restarts.jsonl"
    local i
    for ((i = 1; i <= 3; i++)); do
        restart "$i" >>"$BENCH_TMP/restarts.jsonl"
        bench_say "restarted g$i: $(tail -n 1 "$BENCH_TMP/restarts.jsonl")"
    done
    local done_at=$(($(date +%s) - start))
    wait "$rpid" || true
    wait "$upid" || true
    haproxy_totals >"$BENCH_TMP/lb.json"
    down
    python3 -c 'import json, sys; print(json.dumps({"restarts": [json.loads(l) for l in open(sys.argv[1])]}))' \
        "$BENCH_TMP/restarts.jsonl" >"$BENCH_TMP/restarts.json"
    bench_row "topology=str:three" "instances=3" "cpus_each=$SMALL_CPU" "api=str:roll" "mode=str:$ROLL_MODE" \
        "users=$((ROLL_READ_USERS + ROLL_UPLOAD_USERS))" "duration_s=$ROLL_S" "restarts_done_s=$done_at" \
        "reads=@$r_out" "uploads=@$u_out" @"$BENCH_TMP/lb.json" @"$BENCH_TMP/restarts.json" \
        "loadavg=str:$(bench_loadavg)"
    bench_say "rolling restart ($ROLL_MODE): reads $(bench_json "$r_out" samples) samples, $(bench_json "$r_out" errors) failed;" \
        "uploads $(bench_json "$u_out" samples) samples, $(bench_json "$u_out" errors) failed; restarts done at ${done_at}s of ${ROLL_S}s"
}

main() {
    bench_init s4
    trap s4_cleanup EXIT
    [[ -x $BIN_DIR/sluice-load && -x $BIN_DIR/sluice-gateway && -x $BIN_DIR/sluice-slow-backend ]] ||
        bench_die "sluice-load, sluice-gateway and sluice-slow-backend must be built in $BIN_DIR"
    command -v haproxy >/dev/null || bench_die "haproxy not installed (scripts/bootstrap installs it)"
    [[ -w $CG_ROOT/cpu.cfs_quota_us || -w $CG_ROOT ]] || bench_die "$CG_ROOT is not writable (cgroup v1 cpu controller, root)"
    head -c "$UPLOAD_BYTES" /dev/urandom >"$BENCH_TMP/upload.bin"
    for k in EXPERIMENTS TOPOLOGIES LOOPS RAMP_UP READ_S BANDWIDTH_MBIT LIMIT LIMIT_QUEUE LIMIT_WAIT_MS \
        RESPONSE_TIMEOUT_MS CLIENT_TIMEOUT_S UPLOAD_BYTES ONE_CPU SMALL_CPU ROLL ROLL_MODES ROLL_S ROLL_WARM_S ROLL_READ_USERS \
        ROLL_UPLOAD_USERS SHUTDOWN_TIMEOUT_MS SHUTDOWN_DELAY_MS FAST; do
        bench_param "$k" "${!k}"
    done
    bench_param haproxy "$(haproxy -v | head -n 1 | cut -d' ' -f1-3)"
    local experiment topology
    for experiment in $EXPERIMENTS; do
        for topology in $TOPOLOGIES; do
            run_point "$topology" "$experiment"
        done
    done
    local mode
    if [[ $ROLL == 1 ]]; then
        for mode in $ROLL_MODES; do
            run_roll "$mode"
        done
    fi
    bench_note "Errors are the user's (sluice-load's): 503 from an instance's limiter when a waiter passed" \
        "LIMIT_WAIT_MS, 504 when the upstream call passed RESPONSE_TIMEOUT_MS, 502/503 from haproxy; by kind in the JSON."
    bench_note "TPS is samples / the run's elapsed time, ramp-up included (JMeter's Summary Report throughput)."
    bench_note "lb_retries / lb_redispatches: haproxy's own retries (a refused connect during a restart)."
    bench_report s4
    local py=python3
    [[ -x /usr/bin/python3 ]] && py=/usr/bin/python3 # Debian's, with python3-matplotlib
    "$py" "$BENCH_DIR/scenarios/s4_report.py" plot "$RESULTS_DIR/s4-$BENCH_STAMP.json" || true
}

main "$@"
