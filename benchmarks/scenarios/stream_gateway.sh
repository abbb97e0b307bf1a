#!/usr/bin/env bash
# A large response through sluice-gateway to a slow reader (issue 7, "must show": a 100 MB
# response through the gateway to a slow reader, gateway RSS growth <= 2 MiB).
#
#   benchmarks/scenarios/stream_gateway.sh
#   CASES="epoll:async uring:resume" BYTES=67108864 RATE_MBPS=20 benchmarks/scenarios/stream_gateway.sh
#
# sluice-slow-backend serves GET /bytes?n=BYTES; sluice-gateway (one I/O thread) relays it on
# /api/{style}/bytes; stream_reader.py reads it at RATE_MBPS (MB/s), checks every byte (the
# backend's pattern: byte i is 'a' + i % 26) and samples the gateway's VmRSS from /proc every
# 50 ms. Growth = the peak during the transfer minus VmRSS after a WARMUP_BYTES warm-up request read at
# full speed (it opens the upstream connection and touches the drivers' fixed, per-loop receive
# buffer pools, which io_uring maps page by page on first use). The
# sync style buffers the body whole (docs/gateway.md), so it is not a case here.
#
# Environment (defaults): CASES ("epoll:async epoll:resume epoll:co uring:async uring:resume uring:co"),
# BYTES (104857600), RATE_MBPS (20), WARMUP_BYTES (67108864), BIN_DIR (build/release/bin), RESULTS_DIR
# (benchmarks/results). Every process started here is stopped by PID on exit; each case is
# bounded by a timeout (BYTES / rate + 60 s).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_ROOT=$(cd "$BENCH_DIR/.." && pwd)
BIN_DIR=${BIN_DIR:-$REPO_ROOT/build/release/bin}
RESULTS_DIR=${RESULTS_DIR:-$BENCH_DIR/results}
CASES=${CASES:-"epoll:async epoll:resume epoll:co uring:async uring:resume uring:co"}
BYTES=${BYTES:-104857600}
RATE_MBPS=${RATE_MBPS:-20}
WARMUP_BYTES=${WARMUP_BYTES:-67108864}
READER="$BENCH_DIR/scenarios/stream_reader.py"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
TMP=$(mktemp -d /tmp/sluice-stream-gateway.XXXXXX)
PIDS=()

cleanup() {
    local p
    for p in "${PIDS[@]}"; do
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in "${PIDS[@]}"; do
        timeout 10 tail --pid="$p" -f /dev/null 2>/dev/null || kill -KILL "$p" 2>/dev/null || true
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

wait_port() {
    local port=$1 tenths=100
    while ((tenths-- > 0)); do
        if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$port),0.2).close()" 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    echo "stream_gateway: nothing listens on $port" >&2
    return 1
}

UP_PORT=$(free_port)
"$BIN_DIR/sluice-slow-backend" --backend epoll --listen "127.0.0.1:$UP_PORT" --io-threads 1 >"$TMP/backend.log" 2>&1 &
PIDS+=($!)
wait_port "$UP_PORT"

rows=()
for c in $CASES; do
    backend=${c%%:*}
    style=${c##*:}
    gw_port=$(free_port)
    "$BIN_DIR/sluice-gateway" --backend "$backend" --listen "127.0.0.1:$gw_port" --io-threads 1 \
        --upstream "127.0.0.1:$UP_PORT" >"$TMP/gateway-$c.log" 2>&1 &
    gw=$!
    PIDS+=("$gw")
    wait_port "$gw_port"
    limit=$((BYTES / (RATE_MBPS * 1000000) + 60))
    echo "[$(date -u +%H:%M:%S)] $c: $BYTES bytes at $RATE_MBPS MB/s" >&2
    row=$(timeout "$limit" python3 "$READER" --port "$gw_port" --path "/api/$style/bytes" --bytes "$BYTES" \
        --rate-mbps "$RATE_MBPS" --pid "$gw" --label "$c" --warmup-bytes "$WARMUP_BYTES") ||
        row="{\"label\": \"$c\", \"status\": 0, \"intact\": false, \"received\": 0, \"seconds\": $limit, \"rss_before_kib\": 0, \"rss_peak_kib\": 0, \"rss_growth_kib\": 0}"
    rows+=("$row")
    echo "$row" >&2
    kill -TERM "$gw" 2>/dev/null || true
    timeout 10 tail --pid="$gw" -f /dev/null 2>/dev/null || kill -KILL "$gw" 2>/dev/null || true
done

mkdir -p "$RESULTS_DIR"
json="$RESULTS_DIR/stream_gateway-$STAMP.json"
md="$RESULTS_DIR/stream_gateway-$STAMP.md"
printf '%s\n' "${rows[@]}" | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(json.dumps({"scenario": "stream_gateway", "rows": rows}, indent=1))' >"$json"
{
    echo "# A ${BYTES}-byte response through sluice-gateway to a ${RATE_MBPS} MB/s reader ($STAMP)"
    echo
    echo "Command: CASES=\"$CASES\" BYTES=$BYTES RATE_MBPS=$RATE_MBPS WARMUP_BYTES=$WARMUP_BYTES benchmarks/scenarios/stream_gateway.sh"
    echo "(host: $(nproc) vCPU, $(uname -r); git $(git -C "$REPO_ROOT" rev-parse --short HEAD))"
    echo
    echo "| case | status | bytes intact | seconds | gateway RSS before | peak | growth |"
    echo "|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}" | python3 -c '
import json, sys
for l in sys.stdin:
    if not l.strip():
        continue
    r = json.loads(l)
    mib = lambda v: "%.1f MiB" % (v / 1024)
    print("| %s | %d | %s (%d) | %.1f | %s | %s | %d KiB |" % (r["label"], r["status"], r["intact"], r["received"],
          r["seconds"], mib(r["rss_before_kib"]), mib(r["rss_peak_kib"]), r["rss_growth_kib"]))'
} >"$md"
cat "$md"
