#!/usr/bin/env bash
# Server CPU per request and req/s for plaintext GET / with the admin listener (metrics) and
# the access log off and on: sluice-hello (epoll, 1 I/O thread) under wrk, RUNS runs of DURATION
# each, CPU read from /proc/<pid>/stat (utime+stime) around each run. Prints one line per run
# and the medians. Usage: benchmarks/scenarios/ops_cost.sh [build dir]
set -euo pipefail
bin=${1:-build/release}/bin/sluice-hello
runs=${RUNS:-5}
duration=${DURATION:-5}
tick=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
measure() { # name, extra args...
    local name=$1
    shift
    local port=$((20000 + RANDOM % 20000))
    "$bin" --backend epoll --listen "127.0.0.1:$port" "$@" >/tmp/ops_cost_server.log 2>&1 &
    local pid=$!
    sleep 0.5
    wrk -t1 -c50 -d1s "http://127.0.0.1:$port/" >/dev/null # warm up
    local results=()
    for _ in $(seq "$runs"); do
        local c0 c1 out reqs
        c0=$(cpu_ticks $pid)
        out=$(wrk -t1 -c50 -d"${duration}s" "http://127.0.0.1:$port/")
        c1=$(cpu_ticks $pid)
        reqs=$(echo "$out" | awk '/requests in/ {print $1}')
        results+=("$(awk -v c=$((c1 - c0)) -v r="$reqs" -v t="$tick" -v d="$duration" \
            'BEGIN {printf "%.3f %.0f", c / t / r * 1e6, r / d}')")
        echo "$name run: $(echo "${results[-1]}" | awk '{print $1 " us CPU/req, " $2 " req/s"}')"
    done
    kill -TERM $pid
    wait $pid || true
    printf '%s\n' "${results[@]}" | sort -n -k1 | awk -v n="$name" '{a[NR]=$1} END {printf "%s median: %s us CPU/req\n", n, a[int((NR+1)/2)]}'
    printf '%s\n' "${results[@]}" | sort -n -k2 | awk -v n="$name" '{a[NR]=$2} END {printf "%s median: %s req/s\n", n, a[int((NR+1)/2)]}'
}
measure off
measure metrics --set admin.listen=127.0.0.1:0
measure access_log --set access_log.path=/tmp/ops_cost_access.log
rm -f /tmp/ops_cost_access.log
