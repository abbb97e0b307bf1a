#!/usr/bin/env bash
# testssl.sh (Debian's testssl.sh package) against a sluice TLS listener with sluice's default TLS
# settings (issue 9): sluice-hello on epoll, an ECDSA P-256 certificate made for the run. Keeps
# testssl's whole output (text log and flat JSON) beside the summary, and checks the issue's
# criteria: no SSLv2/3, TLS 1.0/1.1, RC4, 3DES, NULL, export, CBC or non-FS suites offered;
# forward secrecy on every suite; no vulnerability it checks reported. The certificate's trust
# findings (self-signed, no OCSP/CRL/CT, short validity) are about the test certificate, not
# sluice, and are listed apart.
#
#   benchmarks/scenarios/tls_audit.sh
#
# Environment (defaults): TESTSSL_ARGS ("": every default check; e.g. "--fast" to shorten),
# TESTSSL_TIMEOUT (1200 s), SLUICE_SET ("": more --set key=value for the server, e.g. to audit a
# non-default tls.ciphers).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TESTSSL_ARGS=${TESTSSL_ARGS:-}
TESTSSL_TIMEOUT=${TESTSSL_TIMEOUT:-1200}
SLUICE_SET=${SLUICE_SET:-}

main() {
    bench_init tls_audit
    for k in TESTSSL_ARGS TESTSSL_TIMEOUT SLUICE_SET; do bench_param "$k" "${!k}"; done
    local testssl
    testssl=$(command -v testssl || command -v testssl.sh) || bench_die "testssl not found (scripts/bootstrap installs testssl.sh)"
    bench_make_cert "$BENCH_TMP"
    local port extra=() s
    port=$(bench_free_port)
    for s in $SLUICE_SET; do extra+=(--set "$s"); done
    bench_start_sluice "$BENCH_TMP/sluice.log" "$port" --backend epoll --io-threads 1 --set log_level=warn \
        --set "tls.cert=$BENCH_TMP/cert.pem" --set "tls.key=$BENCH_TMP/key.pem" "${extra[@]+"${extra[@]}"}" ||
        bench_die "sluice: $SERVER_ERROR"
    local pid=$SERVER_PID out="$RESULTS_DIR/tls_audit-$BENCH_STAMP"
    mkdir -p "$RESULTS_DIR"
    # shellcheck disable=SC2206 # TESTSSL_ARGS is a list of options
    local cmd=("$testssl" --quiet --color 0 --warnings off --openssl-timeout 10 --connect-timeout 10 $TESTSSL_ARGS
        --logfile "$out-testssl.log" --jsonfile "$out-testssl.json" "https://127.0.0.1:$port/")
    bench_log_cmd "${cmd[*]}"
    bench_say "testssl: ${cmd[*]}"
    local rc=0 t0=$SECONDS
    timeout --kill-after=10 "$TESTSSL_TIMEOUT" "${cmd[@]}" >"$BENCH_TMP/testssl.out" 2>&1 || rc=$?
    local alive=false
    bench_alive "$pid" && alive=true
    bench_row "testssl_rc=$rc" "testssl_s=$((SECONDS - t0))" "alive_after=$alive" "json=str:$out-testssl.json" \
        "log=str:$out-testssl.log" "fds_after=$(bench_fds "$pid")"
    bench_note "testssl's exit code is the number of findings at or above its own threshold, not a failure of" \
        "the run; the criteria are judged from the JSON (tls_audit_report.py). Its text output:" \
        "$(basename "$out")-testssl.log, its findings: $(basename "$out")-testssl.json."
    bench_report tls_audit
}

main "$@"
