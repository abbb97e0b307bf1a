#!/usr/bin/env bash
# Zero-downtime restart under load (docs/operations.md, "Zero-downtime restart"): wrk keeps
# CONNS keep-alive connections busy on sluice-hello while the server is replaced RESTARTS times,
# two ways:
#   handover   each new process takes the listening sockets over from the running one through
#              handover_socket; the old one drains and exits 0 by itself;
#   reuseport  each new process binds a socket of its own in the SO_REUSEPORT group (passed in
#              through LISTEN_FDS by a small launcher, as a supervisor would), then the old one
#              gets SIGTERM: the connections queued on the old sockets are reset when it closes
#              them, and its idle keep-alive connections are closed under the client.
# wrk counts every connect/read/write error and timeout; the handover rows should show none.
#
# Usage: benchmarks/scenarios/restart.sh
#   CONNS (1000) RESTARTS (10) INTERVAL (1.5 s between restarts) BACKEND (epoll) IO_THREADS (2)
#   MODES ("handover reuseport")
# Results: benchmarks/results/restart-<UTC timestamp>/ (wrk output, server logs, summary.md).
set -euo pipefail
# shellcheck source=benchmarks/scenarios/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init restart

CONNS=${CONNS:-1000}
RESTARTS=${RESTARTS:-10}
INTERVAL=${INTERVAL:-1.5}
BACKEND=${BACKEND:-epoll}
IO_THREADS=${IO_THREADS:-2}
MODES=${MODES:-handover reuseport}
OUT="$RESULTS_DIR/restart-$BENCH_STAMP"
mkdir -p "$OUT"
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
HELLO="$BIN_DIR/sluice-hello"

# The launcher of the reuseport mode: binds a SO_REUSEPORT socket of its own on the port and
# execs the server with it as systemd would (LISTEN_FDS=1, LISTEN_PID = the same process).
LAUNCHER='import os, socket, sys
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("127.0.0.1", port))
s.listen(4096)
if s.fileno() != 3:
    os.dup2(s.fileno(), 3)
os.set_inheritable(3, True)
os.environ["LISTEN_FDS"] = "1"
os.environ["LISTEN_PID"] = str(os.getpid())
os.execv(sys.argv[2], sys.argv[2:])'
echo "$LAUNCHER" >"$OUT/reuseport_launcher.py"

# start_generation MODE PORT N -> GEN_PID; waits (bounded) for its "listening on" line.
start_generation() {
    local mode=$1 port=$2 n=$3 log="$OUT/server-$1-$3.log"
    local args=(--listen "127.0.0.1:$port" --backend "$BACKEND" --io-threads "$IO_THREADS"
        --set shutdown_timeout_ms=5000 --set limits.max_connections=20000)
    local cmd
    if [[ $mode == handover ]]; then
        cmd=("$HELLO" "${args[@]}" --set "handover_socket=$BENCH_TMP/handover.sock")
    else
        cmd=(python3 "$OUT/reuseport_launcher.py" "$port" "$HELLO" "${args[@]}")
    fi
    ((n > 0)) || bench_log_cmd "$mode: ${cmd[*]}"
: >"$log"
    "${cmd[@]}" >"$log" 2>&1 &
    GEN_PID=$!
    STARTED_PIDS+=("$GEN_PID")
    local tenths=100
    while ((tenths-- > 0)); do
        grep -q "listening on" "$log" && return 0
        bench_alive "$GEN_PID" || break
        sleep 0.1
    done
    bench_die "$mode generation $n did not start: $(tail -n 3 "$log")"
}

# wait_exit_code PID -> EXIT_CODE, its exit status (bounded: SIGKILL after 20 s, then 137).
# Not in $(...): a subshell cannot wait for this shell's children.
wait_exit_code() {
    local pid=$1
    if ! bench_wait_exit "$pid" 20; then
        kill -KILL "$pid" 2>/dev/null || true
    fi
    EXIT_CODE=0
    wait "$pid" || EXIT_CODE=$?
    bench_forget "$pid"
}

run_mode() {
    local mode=$1 port
    port=$(bench_free_port)
    start_generation "$mode" "$port" 0
    local current=$GEN_PID
    # wrk runs until the restarts are done (plus 2 s of the last generation): SIGINT makes it
    # stop and print its report. The -d bound only matters if this script dies meanwhile.
    local wrk_cmd=(wrk -t2 -c"$CONNS" -d300s --timeout 5s "http://127.0.0.1:$port/")
    bench_log_cmd "$mode: ${wrk_cmd[*]}   # stopped with SIGINT 2 s after the last restart"
    "${wrk_cmd[@]}" >"$OUT/wrk-$mode.txt" 2>&1 &
    local wrk_pid=$!
    STARTED_PIDS+=("$wrk_pid")
    sleep 2
    local exits=() t0=$SECONDS
    for ((n = 1; n <= RESTARTS; n++)); do
        start_generation "$mode" "$port" "$n"
        if [[ $mode == reuseport ]]; then
            kill -TERM "$current"
        fi
        wait_exit_code "$current"
        exits+=("$EXIT_CODE")
        current=$GEN_PID
        bench_say "$mode: restart $n done (old exit $EXIT_CODE)"
        sleep "$INTERVAL"
    done
    sleep 2
    kill -INT "$wrk_pid"
    bench_wait_exit "$wrk_pid" 30 || bench_die "wrk did not stop on SIGINT"
    wait "$wrk_pid" || true
    bench_forget "$wrk_pid"
    bench_say "$mode: $RESTARTS restarts in $((SECONDS - t0)) s"
    bench_stop "$current" 10
    local f="$OUT/wrk-$mode.txt" requests errors non2xx
    requests=$(awk '/requests in/ { print $1 }' "$f")
    errors=$(awk '/Socket errors/ { gsub(",", ""); print "connect " $4 ", read " $6 ", write " $8 ", timeout " $10 }' "$f")
    non2xx=$(awk '/Non-2xx/ { print $NF }' "$f")
    printf '| %s | %s | %s | %s | %s | %s |\n' "$mode" "$RESTARTS" "$requests" \
        "${errors:-connect 0, read 0, write 0, timeout 0}" "${non2xx:-0}" "$(tr ' ' '\n' <<<"${exits[*]}" | sort | uniq -c | awk '{printf "%s%s×%s", sep, $1, $2; sep=" "}')" \
        >>"$OUT/rows.md"
}

for mode in $MODES; do
    bench_say "mode $mode: wrk -c$CONNS, $RESTARTS restarts every ${INTERVAL}s, backend $BACKEND, $IO_THREADS I/O threads"
    run_mode "$mode"
done

{
    echo "# Zero-downtime restart ($BENCH_STARTED_UTC)"
    echo
    echo "sluice-hello, backend $BACKEND, $IO_THREADS I/O threads; wrk -t2 -c$CONNS; $RESTARTS restarts, one every ${INTERVAL}s."
    echo
    echo "| mode | restarts | requests | wrk socket errors | non-2xx | old process exit codes (count×code) |"
    echo "|---|---|---|---|---|---|"
    cat "$OUT/rows.md"
    echo
    echo "Commands:"
    echo
    sed 's/^/    /' "$BENCH_TMP/commands.txt"
} >"$OUT/summary.md"
rm -f "$OUT/rows.md"
cat "$OUT/summary.md"
echo "results: $OUT" >&2
