#!/usr/bin/env bash
# TLS cost (issue 9): sluice-hello with a TLS listener (one per backend of BACKENDS, 1 I/O
# thread) against nginx (1 worker), the same ECDSA P-256 certificate (made for the run) and the
# same suites, alternating server by server within each row, RUNS times:
#
#   full_<v>      full handshakes/s: openssl s_time -new -www / (one new TLS <v> connection per
#                 GET /, HTTP/1.0, the server closes), HS_CLIENTS clients at once
#   resumed_<v>   resumed handshakes/s: openssl s_time -reuse -www / (session resumption: a
#                 ticket on 1.3, a ticket or the session cache on 1.2)
#   keepalive     wrk -t1 -cCONNS https://.../ (TLS 1.3, keep-alive)
#
# for each TLS version v of VERSIONS. Every row also has the server's CPU per operation: its
# utime + stime (/proc/PID/stat; nginx: master + worker) over the run / the operations completed.
# The rate is the operations over the wall time of the client(s), measured here (s_time prints
# whole seconds only). Goal (issue 9): sluice >= 1.0x nginx on every row, CPU per operation
# <= 0.9x nginx. On a shared machine only the ratios of one run mean anything.
#
#   benchmarks/scenarios/tls_cost.sh
#
# Environment (defaults): RUNS (3), DURATION (8 s per row and server), CONNS (256),
# BACKENDS ("epoll uring"), VERSIONS ("1.3 1.2"), HS_CLIENTS (2), ROWS ("full resumed keepalive").
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${RUNS:-3}
DURATION=${DURATION:-8}
CONNS=${CONNS:-256}
BACKENDS=${BACKENDS:-"epoll uring"}
VERSIONS=${VERSIONS:-"1.3 1.2"}
HS_CLIENTS=${HS_CLIENTS:-2}
ROWS=${ROWS:-"full resumed keepalive"}
REPORT_PY="$BENCH_DIR/scenarios/tls_cost_report.py"

now() { date +%s.%N; }

# handshakes NAME RUN MODE(new|reuse) VERSION PORT PIDS...: HS_CLIENTS s_time clients at once.
handshakes() {
    local name=$1 run=$2 mode=$3 version=$4 port=$5
    shift 5
    local pids=("$@") out="$BENCH_TMP/stime-$RANDOM" c0 c1 t0 t1 i jobs=()
    local cmd=(openssl s_time -connect "127.0.0.1:$port" "-$mode" -time "$DURATION" -www / "-tls${version/./_}")
    bench_log_cmd "${cmd[*]}   # x$HS_CLIENTS at once"
    c0=$(bench_cpu_ticks "${pids[@]}")
    t0=$(now)
    for ((i = 0; i < HS_CLIENTS; i++)); do
        timeout --kill-after=5 $((DURATION + 30)) "${cmd[@]}" >"$out.$i" 2>&1 &
        jobs+=($!)
    done
    for i in "${jobs[@]}"; do wait "$i" || true; done
    t1=$(now)
    c1=$(bench_cpu_ticks "${pids[@]}")
    local label
    [[ $mode == new ]] && label="full_$version" || label="resumed_$version"
    python3 "$REPORT_PY" parse-stime "$(python3 -c "print($t1 - $t0)")" "$out".* >"$out.json"
    bench_row "server=str:$name" "run=$run" "row=str:$label" @"$out.json" \
        "server_cpu_s=$(python3 -c "print(($c1 - $c0) / $(getconf CLK_TCK))")" "loadavg=str:$(bench_loadavg)"
    bench_say "$name run $run $label: $(bench_json "$out.json" rate)/s, reused $(bench_json "$out.json" reused)," \
        "CPU $(((c1 - c0) * 1000 / $(getconf CLK_TCK))) ms"
}

keepalive() {
    local name=$1 run=$2 port=$3
    shift 3
    local pids=("$@") out="$BENCH_TMP/wrk-$RANDOM.txt" c0 c1 rss
    c0=$(bench_cpu_ticks "${pids[@]}")
    bench_wrk "$out" "$DURATION" -t1 -c"$CONNS" -d"${DURATION}s" --timeout 10s --latency "https://127.0.0.1:$port/"
    c1=$(bench_cpu_ticks "${pids[@]}")
    rss=$(bench_rss_kib "${pids[@]}")
    bench_row "server=str:$name" "run=$run" "row=str:keepalive" @"$out.json" "rate=$(bench_json "$out.json" rps)" \
        "ops=$(bench_json "$out.json" requests)" \
        "server_cpu_s=$(python3 -c "print(($c1 - $c0) / $(getconf CLK_TCK))")" "rss_kib=$rss" \
        "loadavg=str:$(bench_loadavg)"
    bench_say "$name run $run keepalive: $(bench_json "$out.json" rps) req/s, errors $(bench_json "$out.json" errors)," \
        "CPU $(((c1 - c0) * 1000 / $(getconf CLK_TCK))) ms"
}

main() {
    bench_init tls_cost
    for k in RUNS DURATION CONNS BACKENDS VERSIONS HS_CLIENTS ROWS; do bench_param "$k" "${!k}"; done
    bench_make_cert "$BENCH_TMP"
    local names=() ports=() pidsets=() backend port
    for backend in $BACKENDS; do
        port=$(bench_free_port)
        if ! bench_start_sluice "$BENCH_TMP/sluice-$backend.log" "$port" --backend "$backend" --io-threads 1 \
            --set log_level=warn --set limits.max_connections=20000 --set "tls.cert=$BENCH_TMP/cert.pem" \
            --set "tls.key=$BENCH_TMP/key.pem"; then
            bench_say "sluice on $backend skipped: $SERVER_ERROR"
            continue
        fi
        names+=("sluice ($backend)")
        ports+=("$port")
        pidsets+=("$SERVER_PID")
    done
    ((${#names[@]} > 0)) || bench_die "no sluice server started"
    port=$(bench_free_port)
    NGINX_LISTEN_OPTS=ssl bench_start_nginx "$BENCH_TMP/nginx.log" "$port" 1 "$(bench_nginx_tls_server "$BENCH_TMP")" ||
        bench_die "nginx: $SERVER_ERROR"
    names+=("nginx")
    ports+=("$port")
    pidsets+=("$SERVER_PID $MEM_PIDS")
    local i
    for ((i = 0; i < ${#names[@]}; i++)); do
        bench_healthy_tls "https://127.0.0.1:${ports[i]}/" || bench_die "${names[i]} does not answer https GET /"
        timeout 20 wrk -t1 -c"$CONNS" -d1s "https://127.0.0.1:${ports[i]}/" >/dev/null 2>&1 || true # warm up
    done
    local run row v pids
    for ((run = 1; run <= RUNS; run++)); do
        for row in $ROWS; do
            for v in $([[ $row == keepalive ]] && echo 1.3 || echo "$VERSIONS"); do
                for ((i = 0; i < ${#names[@]}; i++)); do
                    read -r -a pids <<<"${pidsets[i]}"
                    case $row in
                    full) handshakes "${names[i]}" "$run" new "$v" "${ports[i]}" "${pids[@]}" ;;
                    resumed) handshakes "${names[i]}" "$run" reuse "$v" "${ports[i]}" "${pids[@]}" ;;
                    keepalive) keepalive "${names[i]}" "$run" "${ports[i]}" "${pids[@]}" ;;
                    esac
                done
            done
        done
    done
    for ((i = 0; i < ${#names[@]}; i++)); do
        read -r -a pids <<<"${pidsets[i]}"
        bench_alive "${pids[0]}" || bench_say "${names[i]} died during the run"
    done
    bench_note "Certificate: ECDSA P-256, self-signed, made for the run. TLS 1.2 suites of both: $BENCH_TLS12_CIPHERS" \
        "(sluice's default); TLS 1.3: OpenSSL's default suites and groups on both. nginx: ssl_session_cache" \
        "shared:SSL:10m + tickets (its default); sluice: its session cache + tickets."
    bench_note "rate: operations / the wall time of the clients (measured around them). CPU per op: the" \
        "server's utime + stime over the row / the operations (nginx: master + worker)."
    bench_note "resumed rows: 'reused' counts the connections s_time reports as resumed ('r'); the first of" \
        "each client is a full handshake."
    bench_note "Goal (issue 9): sluice >= 1.0x nginx on every row, CPU per op <= 0.9x nginx."
    bench_report tls_cost
}

main "$@"
