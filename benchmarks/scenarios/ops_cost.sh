#!/usr/bin/env bash
# Server CPU per request and req/s for plaintext GET / with the admin listener (metrics) and
# the access log off and on: three sluice-hello processes (epoll, 1 I/O thread) started side by
# side, measured in turn under wrk within each round (off, metrics, access log, then the next
# round), so that the machine's noise falls on all three alike; RUNS rounds of DURATION seconds
# each, CPU read from /proc/<pid>/stat (utime+stime, every thread: the log writer's included)
# around each run. Prints one line per run, the medians and the ratios to "off".
# Usage: benchmarks/scenarios/ops_cost.sh [build dir]   (RUNS=5, DURATION=5)
set -euo pipefail
bin=${1:-build/release}/bin/sluice-hello
runs=${RUNS:-5}
duration=${DURATION:-5}
tick=$(getconf CLK_TCK)
tmp=$(mktemp -d /tmp/sluice_ops_cost.XXXXXX)
names=(off metrics access_log)
pids=()
ports=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

start() { # name, extra args...
    local name=$1 port=""
    shift
    "$bin" --backend epoll --io-threads 1 --listen 127.0.0.1:0 "$@" >"$tmp/$name.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do
        port=$(sed -n 's/.*(port \([0-9]*\)).*/\1/p' "$tmp/$name.log" | head -n 1)
        [[ -n $port ]] && break
        sleep 0.05
    done
    [[ -n $port ]] || { echo "ops_cost: $name did not start: $(cat "$tmp/$name.log")" >&2; exit 1; }
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
        c0=$(cpu_ticks "${pids[i]}")
        out=$(timeout $((duration + 10)) wrk -t1 -c50 -d"${duration}s" "http://127.0.0.1:${ports[i]}/")
        c1=$(cpu_ticks "${pids[i]}")
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
