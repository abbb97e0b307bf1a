#!/usr/bin/env bash
# Failed TLS handshakes (issue 9): tls_bad_handshakes.py makes COUNT bad or aborted handshakes
# (garbage, plaintext HTTP, half a ClientHello then FIN or RST, a ClientHello then FIN, RST after
# the server's first flight, TLS 1.0 only, non-FS CBC suites only, connect then RST), WORKERS at
# a time, plus SILENT connections that stall mid-ClientHello, against sluice-hello with a TLS
# listener on each backend of BACKENDS. Each must end in a clear error or a clean close: no
# crash, no hang (every connection closed by the server within its deadline; the stalled ones by
# tls.handshake_timeout_ms = HANDSHAKE_TIMEOUT_MS), no leaked fd (the server's fd count back to
# its baseline within 20 s), and a good https GET / served afterwards.
#
#   benchmarks/scenarios/tls_hostile.sh
#
# Environment (defaults): COUNT (10000), WORKERS (32), SILENT (200), HANDSHAKE_TIMEOUT_MS (2000),
# BACKENDS ("epoll uring blocking").
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

COUNT=${COUNT:-10000}
WORKERS=${WORKERS:-32}
SILENT=${SILENT:-200}
HANDSHAKE_TIMEOUT_MS=${HANDSHAKE_TIMEOUT_MS:-2000}
BACKENDS=${BACKENDS:-"epoll uring blocking"}
CLIENT="$BENCH_DIR/scenarios/tls_bad_handshakes.py"

measure() {
    local backend=$1 port out="$BENCH_TMP/bad-$1.json"
    port=$(bench_free_port)
    if ! bench_start_sluice "$BENCH_TMP/sluice-$backend.log" "$port" --backend "$backend" \
        --set log_level=warn --set limits.max_connections=20000 --set "tls.handshake_timeout_ms=$HANDSHAKE_TIMEOUT_MS" \
        --set "tls.cert=$BENCH_TMP/cert.pem" --set "tls.key=$BENCH_TMP/key.pem"; then
        bench_row "backend=str:$backend" "skipped=str:$SERVER_ERROR"
        return
    fi
    local pid=$SERVER_PID
    local cmd=(/usr/bin/python3 "$CLIENT" --port "$port" --pid "$pid" --cafile "$BENCH_TMP/cert.pem" --count "$COUNT"
        --workers "$WORKERS" --silent "$SILENT" --silent-deadline $((HANDSHAKE_TIMEOUT_MS / 1000 + 10)))
    bench_log_cmd "${cmd[*]}"
    local rc=0
    timeout 900 "${cmd[@]}" >"$out" 2>"$out.err" || rc=$?
    [[ -s $out ]] || echo '{}' >"$out"
    local alive=false
    bench_alive "$pid" && alive=true
    bench_row "backend=str:$backend" @"$out" "client_rc=$rc" "alive_after=$alive" \
        "log_lines=$(wc -l <"$BENCH_TMP/sluice-$backend.log")"
    bench_say "$backend: rc $rc, alive $alive: $(cat "$out")"
    bench_stop "$pid"
}

main() {
    bench_init tls_hostile
    for k in COUNT WORKERS SILENT HANDSHAKE_TIMEOUT_MS BACKENDS; do bench_param "$k" "${!k}"; done
    bench_make_cert "$BENCH_TMP"
    local b
    for b in $BACKENDS; do
        measure "$b"
    done
    bench_note "Outcomes per kind: closed (the server closed, FIN), alert (a TLS alert, then FIN), reset (RST from" \
        "the server), http_400 (plaintext HTTP answered 400, then FIN), timeout (no close within 10 s: a hang)," \
        "we_reset (the client reset first, as meant)."
    bench_note "Pass: client_rc 0 = fds back to baseline, a good GET / after, no timeout, every stalled" \
        "connection closed by the server, no connect error; and the server alive."
    bench_report tls_hostile
}

main "$@"
