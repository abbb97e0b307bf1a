#!/usr/bin/env bash
# Server CPU per request and req/s for plaintext GET / with the admin listener (metrics) and
# the access log off and on: three sluice-hello processes (epoll, 1 I/O thread) started side by
# side, measured in turn under wrk within each round (off, metrics, access log, then the next
# round), so that the machine's noise falls on all three alike; RUNS rounds of DURATION seconds
# each, CPU read from /proc/<pid>/stat (utime+stime, every thread: the log writer's included)
# around each run. Prints one line per run, the medians and the ratios to "off".
# Usage: benchmarks/scenarios/ops_cost.sh [build dir]   (RUNS=5, DURATION=5)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ -n ${1:-} ]] && BENCH_BIN_DIR=$1/bin
runs=${RUNS:-5}
duration=${DURATION:-5}
tick=$(getconf CLK_TCK)
bench_init ops_cost # BENCH_TMP, BIN_DIR; stops what it started at exit
tmp=$BENCH_TMP
names=(off metrics access_log)
pids=()
ports=()

start() { # name, extra args...
    local name=$1 port
    shift
    port=$(bench_free_port)
    bench_start_sluice "$tmp/$name.log" "$port" --backend epoll --io-threads 1 "$@" ||
        bench_die "$name did not start: $SERVER_ERROR"
    pids+=("$SERVER_PID")
    ports+=("$port")
}
start off
start metrics --set admin.listen=127.0.0.1:0
start access_log --set "access_log.path=$tmp/access.log"

for i in 0 1 2; do
    timeout 10 wrk -t1 -c50 -d1s "http://127.0.0.1:${ports[i]}/" >/dev/null # warm up
done
for round in $(seq "$runs"); do
    for i in 0 1 2; do
        c0=$(bench_cpu_ticks "${pids[i]}")
        out=$(timeout $((duration + 10)) wrk -t1 -c50 -d"${duration}s" "http://127.0.0.1:${ports[i]}/")
        c1=$(bench_cpu_ticks "${pids[i]}")
        reqs=$(echo "$out" | awk '/requests in/ {print $1}')
        line=$(awk -v c=$((c1 - c0)) -v r="$reqs" -v t="$tick" -v d="$duration" \
            'BEGIN {printf "%.3f %.0f", c / t / r * 1e6, r / d}')
        echo "$line" >>"$tmp/${names[i]}.runs"
        echo "${names[i]} run $round: $(echo "$line" | awk '{print $1 " us CPU/req, " $2 " req/s"}')"
    done
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for n in "${names[@]}"; do
    cpu=$(awk '{print $1}' "$tmp/$n.runs" | median)
    rps=$(awk '{print $2}' "$tmp/$n.runs" | median)
    echo "$n median: $cpu us CPU/req, $rps req/s"
    echo "$cpu $rps" >"$tmp/$n.median"
done
read -r cpu_off rps_off <"$tmp/off.median"
for n in metrics access_log; do
    read -r cpu rps <"$tmp/$n.median"
    awk -v n="$n" -v c="$cpu" -v co="$cpu_off" -v r="$rps" -v ro="$rps_off" \
        'BEGIN {printf "%s vs off: CPU/req %+.1f%%, req/s %.3fx\n", n, (c / co - 1) * 100, r / ro}'
done
lines=$(wc -l <"$tmp/access.log")
echo "access log lines written: $lines"
