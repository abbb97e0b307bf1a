#!/usr/bin/env bash
# S4's claim, as a test: three gateways (0.5 CPU each, cgroup v1) behind haproxy with
# deploy/haproxy/haproxy.cfg are restarted one by one under reads and uploads, each taken out
# of haproxy first (drain), then SIGTERM, restarted, /readyz, back in: no request fails. Then
# the same with SIGTERM alone, the gateways serving on for shutdown_delay_ms with /readyz at
# 503 until haproxy's health check takes them out (delay): no request fails either.
# Runs benchmarks/scenarios/s4.sh with no experiments and ROLL_MODES="drain delay", small loads.
# Usage: rolling_restart_test.sh <source dir> <bin dir>. Exit 77 (skipped) without root, a
# writable cgroup v1 cpu controller, haproxy or wrk (lib.sh asks for it).
set -euo pipefail
src=$1
bin=$2
skip() {
    echo "rolling_restart_test: $*: skipped"
    exit 77
}
[[ $(id -u) == 0 ]] || skip "not root"
[[ -w /sys/fs/cgroup/cpu/cpu.cfs_quota_us || -w /sys/fs/cgroup/cpu ]] || skip "no writable cgroup v1 cpu controller"
command -v haproxy >/dev/null || skip "no haproxy"
command -v wrk >/dev/null || skip "no wrk"
tmp=$(mktemp -d /tmp/sluice_roll.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
BENCH_BIN_DIR=$bin RESULTS_DIR=$tmp EXPERIMENTS="" ROLL_MODES="drain delay" ROLL_S=25 ROLL_WARM_S=2 ROLL_READ_USERS=20 \
    ROLL_UPLOAD_USERS=5 timeout --kill-after=10 240 "$src/benchmarks/scenarios/s4.sh" >"$tmp/run.log" 2>&1 || {
    cat "$tmp/run.log"
    exit 1
}
python3 - "$tmp" <<'PY'
import glob, json, sys
(path,) = glob.glob(sys.argv[1] + "/s4-*.json")
rolls = {r.get("mode"): r for r in json.load(open(path))["runs"] if r.get("api") == "roll"}
problems = [] if sorted(rolls) == ["delay", "drain"] else [f"modes run: {sorted(rolls)}"]
for mode, roll in sorted(rolls.items()):
    for load in ("reads", "uploads"):
        r = roll[load]
        if r.get("samples", 0) <= 0:
            problems.append(f"{mode}: {load}: no samples")
        if r.get("errors") != 0:
            problems.append(f"{mode}: {load}: {r.get('errors')} failed of {r.get('samples')} ({r.get('errors_by_kind')})")
    restarts = roll.get("restarts", [])
    if len(restarts) != 3 or any(x.get("exit_code") != 0 for x in restarts):
        problems.append(f"{mode}: restarts: {restarts}")
    if roll.get("restarts_done_s", 1e9) >= roll.get("duration_s", 0):
        problems.append(f"{mode}: the restarts ended at {roll.get('restarts_done_s')} s, after the load ({roll.get('duration_s')} s)")
if problems:
    print("rolling_restart_test: " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
for mode, roll in sorted(rolls.items()):
    print(f"rolling_restart_test: {mode}: ok: reads {roll['reads']['samples']}, uploads {roll['uploads']['samples']}, 0 failed")
PY
