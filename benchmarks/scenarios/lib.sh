# shellcheck shell=bash disable=SC2034
# Shared functions of the scenario runners; source it, then call bench_init <scenario>.
# (SC2034: SERVER_PID, MEM_PIDS, SERVER_ERROR and RESULTS_DIR are outputs for the runners.)
#
# Servers are started in the background and their PIDs remembered; the EXIT trap stops only
# those PIDs (and the children of an nginx master we started). Every wait is bounded.
#
# BENCH_NICE (unset): run sluice-hello under nice -n BENCH_NICE.
# BENCH_CGROUP (unset): a cgroup v1 directory a server started by bench_start_app joins (S4).
# Binaries: $BENCH_BIN_DIR, else the first of build/release/bin and build/bench/bin that holds
# both sluice-hello and sluice-connhold.
# Results: $RESULTS_DIR (default benchmarks/results)/<scenario>-<UTC timestamp>.{json,md}.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_ROOT=$(cd "$BENCH_DIR/.." && pwd)
BENCHLIB="$BENCH_DIR/scenarios/benchlib.py"
STARTED_PIDS=()

bench_die() {
    echo "bench: $*" >&2
    exit 1
}

bench_say() {
    echo "[$(date -u +%H:%M:%S)] $*" >&2
}

bench_bin_dir() {
    if [[ -n ${BENCH_BIN_DIR:-} ]]; then
        echo "$BENCH_BIN_DIR"
        return
    fi
    local d
    for d in "$REPO_ROOT/build/release/bin" "$REPO_ROOT/build/bench/bin"; do
        if [[ -x $d/sluice-hello && -x $d/sluice-connhold ]]; then
            echo "$d"
            return
        fi
    done
    bench_die "no sluice-hello + sluice-connhold in build/release/bin or build/bench/bin (run scripts/build release, or set BENCH_BIN_DIR)"
}

bench_init() {
    BENCH_SCENARIO=$1
    BENCH_TMP=$(mktemp -d "/tmp/sluice-bench-$BENCH_SCENARIO.XXXXXX")
    BENCH_STARTED_UTC=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    BENCH_STAMP=$(date -u +%Y%m%dT%H%M%SZ)
    RESULTS_DIR=${RESULTS_DIR:-$BENCH_DIR/results}
    BIN_DIR=$(bench_bin_dir)
    : >"$BENCH_TMP/rows.jsonl"
    : >"$BENCH_TMP/commands.txt"
    : >"$BENCH_TMP/params.txt"
    : >"$BENCH_TMP/notes.txt"
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
    command -v wrk >/dev/null || bench_die "wrk not found (scripts/bootstrap installs it)"
}

# --- processes ---------------------------------------------------------------------------------

bench_alive() {
    kill -0 "$1" 2>/dev/null
}

# Waits (bounded) for PID to exit; 0 if it did.
bench_wait_exit() {
    local pid=$1 tenths=$(($2 * 10))
    while ((tenths-- > 0)); do
        bench_alive "$pid" || return 0
        sleep 0.1
    done
    ! bench_alive "$pid"
}

# SIGTERM, then SIGKILL after a bounded wait; the children of PID (nginx workers) too.
bench_stop() {
    local pid=$1 children
    bench_alive "$pid" || return 0
    children=$(pgrep -P "$pid" 2>/dev/null || true)
    kill -TERM "$pid" 2>/dev/null || true
    if ! bench_wait_exit "$pid" "${2:-10}"; then
        bench_say "pid $pid did not exit on SIGTERM within ${2:-10}s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        bench_wait_exit "$pid" 5 || true
    fi
    local c
    for c in $children; do
        if bench_alive "$c"; then
            kill -KILL "$c" 2>/dev/null || true
        fi
    done
    wait "$pid" 2>/dev/null || true
    bench_forget "$pid"
}

# Once reaped, a PID may be reused by someone else's process: never signal it again.
bench_forget() {
    local keep=() p
    for p in "${STARTED_PIDS[@]+"${STARTED_PIDS[@]}"}"; do
        [[ $p == "$1" ]] || keep+=("$p")
    done
    STARTED_PIDS=("${keep[@]+"${keep[@]}"}")
}

bench_cleanup() {
    local rc=$? pid
    for pid in "${STARTED_PIDS[@]+"${STARTED_PIDS[@]}"}"; do
        bench_stop "$pid" 5
    done
    if [[ -n ${BENCH_TMP:-} && ${BENCH_KEEP_TMP:-0} != 1 ]]; then
        rm -rf "$BENCH_TMP"
    elif [[ -n ${BENCH_TMP:-} ]]; then
        echo "bench: temp files kept in $BENCH_TMP" >&2
    fi
    exit "$rc"
}

bench_free_port() {
    python3 "$BENCHLIB" free-port
}

# Waits until something listens on PORT; fails if PID dies first or after TIMEOUT seconds.
bench_wait_port() {
    local port=$1 pid=$2 tenths=$((${3:-10} * 10))
    while ((tenths-- > 0)); do
        bench_alive "$pid" || return 1
        if ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

bench_log_cmd() {
    echo "$*" >>"$BENCH_TMP/commands.txt"
}

# bench_start_sluice LOG PORT ARGS... -> SERVER_PID, MEM_PIDS; non-zero (and SERVER_ERROR) if it
# did not come up, e.g. a backend this build does not register.
bench_start_sluice() {
    bench_start_app sluice-hello "$@"
}

# bench_start_app BINARY LOG PORT ARGS...: as bench_start_sluice, for any sluice app in BIN_DIR
# (sluice-gateway, sluice-slow-backend, ...).
bench_start_app() {
    local bin=$1 log=$2 port=$3
    shift 3
    [[ -x $BIN_DIR/$bin ]] || {
        SERVER_ERROR="$bin not built in $BIN_DIR"
        return 1
    }
    local cmd=("$BIN_DIR/$bin" --listen "127.0.0.1:$port" "$@")
    # BENCH_NICE: the server's scheduling priority (nice execs, so the PID stays the server's).
    [[ -n ${BENCH_NICE:-} ]] && cmd=(nice -n "$BENCH_NICE" "${cmd[@]}")
    # BENCH_CGROUP (S4's CPU quotas): a cgroup v1 directory the server joins before it execs, so
    # every thread it ever starts is in it (moving a running PID later would race its threads).
    # shellcheck disable=SC2016 # $0 and $@ are the inner shell's
    [[ -n ${BENCH_CGROUP:-} ]] && cmd=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$BENCH_CGROUP" "${cmd[@]}")
    bench_log_cmd "${cmd[*]}"
    # The logged command is the whole configuration: no SLUICE_<KEY> from our environment leaks in
    # (sluice also refuses to start on an unknown SLUICE_ variable).
    local scrub=() v
    for v in $(compgen -e | grep '^SLUICE_' || true); do
        scrub+=(-u "$v")
    done
    env "${scrub[@]+"${scrub[@]}"}" "${cmd[@]}" >"$log" 2>&1 &
    local pid=$!
    STARTED_PIDS+=("$pid")
    SERVER_PID=$pid
    MEM_PIDS=$pid
    SERVER_ERROR=""
    if ! bench_wait_port "$port" "$pid" 10; then
        # shellcheck disable=SC1003 # deletes quotes and backslashes (they would break the JSON row)
        SERVER_ERROR=$(grep -v '^$' "$log" | tail -n 1 | tr -d '"\\' | cut -c1-200)
        [[ -n $SERVER_ERROR ]] || SERVER_ERROR="did not listen on port $port within 10 s"
        bench_stop "$pid" 5
        return 1
    fi
}

# bench_write_nginx_conf PREFIX PORT WORKERS [EXTRA_LOCATIONS [EXTRA_HTTP]] (EXTRA_HTTP: blocks of the
# http context, e.g. an upstream {} for proxy_pass)
# NGINX_LOAD_MODULES (unset): lines put first, e.g. "load_module /usr/lib/nginx/modules/x.so;".
# NGINX_LISTEN_OPTS (unset): more parameters of the listen directive, e.g. "ssl" (the ssl_*
# directives then go in EXTRA_LOCATIONS, which is inside the server {} block).
bench_write_nginx_conf() {
    local prefix=$1 port=$2 workers=$3 extra=${4:-} http_extra=${5:-}
    mkdir -p "$prefix/logs" "$prefix/tmp"
    cat >"$prefix/nginx.conf" <<EOF
${NGINX_LOAD_MODULES:-}
worker_processes $workers;
worker_rlimit_nofile 20000;
pid $prefix/nginx.pid;
error_log $prefix/logs/error.log warn;
events {
    worker_connections 20000;
}
http {
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 600s;
    client_body_temp_path $prefix/tmp/body;
    proxy_temp_path $prefix/tmp/proxy;
    fastcgi_temp_path $prefix/tmp/fastcgi;
    uwsgi_temp_path $prefix/tmp/uwsgi;
    scgi_temp_path $prefix/tmp/scgi;
$http_extra
    server {
        listen 127.0.0.1:$port backlog=4096${NGINX_LISTEN_OPTS:+ $NGINX_LISTEN_OPTS};
        location / {
            default_type text/plain;
            return 200 "Hello, World!";
        }
$extra
    }
}
EOF
}

# bench_start_nginx LOG PORT WORKERS [EXTRA_LOCATIONS [EXTRA_HTTP]] -> SERVER_PID (master), MEM_PIDS
# (workers).
bench_start_nginx() {
    local log=$1 port=$2 workers=$3 extra=${4:-} http_extra=${5:-}
    command -v nginx >/dev/null || {
        SERVER_ERROR="nginx not installed"
        return 1
    }
    local prefix
    prefix=$(mktemp -d "$BENCH_TMP/nginx.XXXXXX")
    chmod 755 "$prefix"
    bench_write_nginx_conf "$prefix" "$port" "$workers" "$extra" "$http_extra"
    local cmd=(nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/logs/error.log" -g "daemon off;")
    bench_log_cmd "${cmd[*]}   # config: worker_processes $workers; access_log off; return 200 \"Hello, World!\"$([[ -n $extra ]] && echo "; $(tr -s ' \n' ' ' <<<"$http_extra $extra")")"
    "${cmd[@]}" >"$log" 2>&1 &
    local pid=$!
    STARTED_PIDS+=("$pid")
    SERVER_PID=$pid
    SERVER_ERROR=""
    if ! bench_wait_port "$port" "$pid" 10; then
        SERVER_ERROR="nginx did not start: $(tail -n 1 "$prefix/logs/error.log" 2>/dev/null | cut -c1-200)"
        bench_stop "$pid" 5
        return 1
    fi
    local tenths=50
    MEM_PIDS=""
    while ((tenths-- > 0)); do
        MEM_PIDS=$(pgrep -P "$pid" | tr '\n' ' ' || true)
        [[ $(wc -w <<<"$MEM_PIDS") -ge $workers ]] && break
        sleep 0.1
    done
}

# --- measurements ------------------------------------------------------------------------------

# Sum of a /proc/PID/status field (kB or count) over PIDS.
bench_status_sum() {
    local field=$1 pid total=0 v
    shift
    for pid in "$@"; do
        v=$(awk -v f="$field:" '$1 == f { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
        total=$((total + ${v:-0}))
    done
    echo "$total"
}

bench_rss_kib() {
    bench_status_sum VmRSS "$@"
}

bench_threads() {
    bench_status_sum Threads "$@"
}

bench_fds() {
    local pid total=0 n
    for pid in "$@"; do
        n=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
        total=$((total + n))
    done
    echo "$total"
}

# "<utime + stime> <utime>" of PIDS (all their threads), summed, in clock ticks (getconf CLK_TCK
# per second): all CPU and its user-space share, from one read of each /proc/PID/stat.
bench_cpu_ticks_split() {
    local pid total=0 user=0 t u
    for pid in "$@"; do
        t='' u=''
        # Fields after the ")" that ends the command name: utime is the 12th, stime the 13th.
        read -r t u < <(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{ print $12 + $13, $12 }') || true
        total=$((total + ${t:-0}))
        user=$((user + ${u:-0}))
    done
    echo "$total $user"
}

# utime + stime of PIDS, in clock ticks.
bench_cpu_ticks() {
    local total user
    read -r total user < <(bench_cpu_ticks_split "$@")
    echo "$total"
}

bench_loadavg() {
    cut -d' ' -f1-3 /proc/loadavg
}

# 0 if GET URL answers 200 within 5 s.
bench_healthy() {
    local code
    code=$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$1" 2>/dev/null || true)
    [[ $code == 200 ]]
}

# bench_wrk OUT DURATION_S WRK_ARGS... -> OUT (raw) and OUT.json (parsed); bounded by a timeout.
bench_wrk() {
    local out=$1 duration=$2
    shift 2
    local cmd=(wrk "$@")
    bench_log_cmd "${cmd[*]}"
    timeout --kill-after=5 $((duration + 60)) "${cmd[@]}" >"$out" 2>&1 || true
    python3 "$BENCHLIB" parse-wrk "$out" >"$out.json"
}

# bench_json FILE KEY -> a top-level value of the JSON object in FILE's last line.
bench_json() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
try:
    lines = open(sys.argv[1], encoding="utf-8").read().strip().splitlines()
    v = json.loads(lines[-1]) if lines else {}
    for k in sys.argv[2].split("."):
        v = v.get(k) if isinstance(v, dict) else None
    print("" if v is None else v)
except (OSError, ValueError):
    print("")
EOF
}

# --- results -----------------------------------------------------------------------------------

bench_param() {
    echo "$1=$2" >>"$BENCH_TMP/params.txt"
}

bench_note() {
    echo "$*" >>"$BENCH_TMP/notes.txt"
}

# bench_row KEY=VALUE... @FILE... -> one row of the results.
bench_row() {
    python3 "$BENCHLIB" row "$@" >>"$BENCH_TMP/rows.jsonl"
}

bench_commit() {
    local c
    if [[ -f $BIN_DIR/COMMIT ]]; then
        cat "$BIN_DIR/COMMIT" # a snapshot build (build_snapshot.sh) says what it is
        return
    fi
    c=$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
    if [[ -n $(git -C "$REPO_ROOT" status --porcelain --untracked-files=no 2>/dev/null) ]]; then
        c="$c+dirty"
    fi
    echo "$c"
}

# bench_report KIND: writes RESULTS_DIR/<scenario>-<stamp>.{json,md} and prints the table.
bench_report() {
    local kind=$1 meta="$BENCH_TMP/meta.json" base
    mkdir -p "$RESULTS_DIR"
    base="$RESULTS_DIR/$BENCH_SCENARIO-$BENCH_STAMP"
    python3 "$BENCHLIB" row "scenario=str:$BENCH_SCENARIO" "started_utc=str:$BENCH_STARTED_UTC" \
        "finished_utc=str:$(date -u +%Y-%m-%dT%H:%M:%SZ)" "nproc=$(nproc)" "kernel=str:$(uname -r)" \
        "cpu=str:$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)" "fd_limit=$(ulimit -n)" \
        "somaxconn=$(cat /proc/sys/net/core/somaxconn)" "commit=str:$(bench_commit)" \
        "binaries=str:$BIN_DIR" "wrk=str:$(wrk --version 2>&1 | head -n 1 | cut -d' ' -f1-2)" \
        "nginx=str:$(nginx -v 2>&1 | head -n 1)" "params=kv:$BENCH_TMP/params.txt" \
        "notes=lines:$BENCH_TMP/notes.txt" "commands=lines:$BENCH_TMP/commands.txt" >"$meta"
    echo
    python3 "$BENCHLIB" report "$kind" "$BENCH_TMP/rows.jsonl" "$meta" "$base"
    echo
    echo "results: $base.json, $base.md"
}

# --- TLS ---------------------------------------------------------------------------------------

# bench_make_cert DIR -> DIR/cert.pem, DIR/key.pem: a self-signed ECDSA P-256 certificate for
# localhost, made for this run (the key never leaves the run's temp dir).
bench_make_cert() {
    local dir=$1
    timeout 20 openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/key.pem" \
        -out "$dir/cert.pem" -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
        >/dev/null 2>&1 || bench_die "openssl could not make a test certificate"
    chmod 600 "$dir/key.pem"
}

# The TLS 1.2 suites of both servers in the TLS runs: sluice's default (tls_context.cc).
BENCH_TLS12_CIPHERS="ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

# bench_nginx_tls_server DIR: the ssl_* directives of nginx's server {} with DIR's certificate,
# the same suites as sluice, a session cache and tickets (nginx's default), as sluice has.
bench_nginx_tls_server() {
    cat <<EOF2
        ssl_certificate $1/cert.pem;
        ssl_certificate_key $1/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ciphers $BENCH_TLS12_CIPHERS;
        ssl_prefer_server_ciphers on;
        ssl_session_cache shared:SSL:10m;
        ssl_session_timeout 1h;
EOF2
}

# 0 if GET https URL (any certificate) answers 200 within 5 s.
bench_healthy_tls() {
    local code
    code=$(curl -sk -o /dev/null -m 5 -w '%{http_code}' "$1" 2>/dev/null || true)
    [[ $code == 200 ]]
}
