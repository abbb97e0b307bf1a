#!/usr/bin/env python3
"""Watches a server during an attack (stdlib only): its memory and fds, and whether it still serves.

  monitor.py --pid PID --port PORT --duration S [--interval 0.5] [--probe-timeout 1.0] [--no-probe]

Two threads until --duration seconds pass or SIGTERM/SIGINT arrives:
  sampler  every --interval: VmRSS, VmHWM, Threads (/proc/PID/status), open fds (/proc/PID/fd),
           CPU time (utime + stime, /proc/PID/stat) and the 1-minute load average
  probe    every --interval: a fresh connection, "GET / HTTP/1.1", Connection: close; answered =
           a whole 200 response within --probe-timeout of the connect (connect included)
Prints one JSON object on stdout: the series and their summary (peaks, % of probes answered,
the worst probe latency, the longest run of unanswered probes).
"""
import argparse
import json
import os
import re
import signal
import socket
import threading
import time

STOP = threading.Event()
CLK_TCK = os.sysconf("SC_CLK_TCK")


def status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM", "Threads"):
                    out[key] = int(value.split()[0])
    except OSError:
        return None
    try:
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out["cpu_s"] = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
        with open("/proc/loadavg", encoding="ascii") as f:
            out["load1"] = float(f.read().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    return out


def probe_once(port, timeout):
    """(answered, ms, what): a whole 200 response within `timeout` seconds of starting to connect."""
    start = time.monotonic()
    deadline = start + timeout
    what = "timeout"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                s.settimeout(left)
                chunk = s.recv(65536)
                if not chunk:
                    what = "closed" if not data else "short"
                    break
                data += chunk
                head, sep, body = data.partition(b"\r\n\r\n")
                if not sep:
                    continue
                m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                if m and len(body) >= int(m.group(1)):
                    ok = head.startswith(b"HTTP/1.1 200")
                    return ok, (time.monotonic() - start) * 1000, "ok" if ok else head[:12].decode(errors="replace")
    except ConnectionRefusedError:
        what = "refused"
    except ConnectionResetError:
        what = "reset"
    except socket.timeout:
        what = "timeout"
    except OSError as e:
        what = type(e).__name__
    return False, (time.monotonic() - start) * 1000, what


def run(args, t0, samples, probes):
    def sampler():
        while not STOP.is_set():
            s = status(args.pid)
            if s is not None:
                s["t"] = round(time.monotonic() - t0, 2)
                samples.append(s)
            STOP.wait(args.interval)

    def prober():
        while not STOP.is_set():
            started = time.monotonic()
            ok, ms, what = probe_once(args.port, args.probe_timeout)
            probes.append({"t": round(started - t0, 2), "ok": ok, "ms": round(ms, 1), "what": what})
            STOP.wait(max(0.0, args.interval - (time.monotonic() - started)))

    threads = [threading.Thread(target=sampler, daemon=True)]
    if not args.no_probe:
        threads.append(threading.Thread(target=prober, daemon=True))
    for t in threads:
        t.start()
    STOP.wait(args.duration)
    STOP.set()
    for t in threads:
        t.join(timeout=args.probe_timeout + 2)


def summarize(samples, probes):
    out = {"samples": len(samples)}
    if samples:
        out.update({"rss_first_kib": samples[0]["VmRSS"], "rss_last_kib": samples[-1]["VmRSS"],
                    "rss_peak_kib": max(s["VmRSS"] for s in samples), "hwm_kib": samples[-1]["VmHWM"],
                    "fds_first": samples[0]["fds"], "fds_last": samples[-1]["fds"],
                    "fds_peak": max(s["fds"] for s in samples),
                    "threads_peak": max(s["Threads"] for s in samples),
                    "server_cpu_s": round(samples[-1]["cpu_s"] - samples[0]["cpu_s"], 2),
                    "window_s": round(samples[-1]["t"] - samples[0]["t"], 2),
                    "load1_max": max(s["load1"] for s in samples)})
    answered = [p for p in probes if p["ok"]]
    out["probes"] = len(probes)
    out["probes_answered"] = len(answered)
    out["probes_pct"] = round(100.0 * len(answered) / len(probes), 1) if probes else None
    # Worst latency over every probe: an unanswered one counts as its full time (the timeout).
    out["probe_worst_ms"] = max((p["ms"] for p in probes), default=None)
    out["probe_answered_worst_ms"] = max((p["ms"] for p in answered), default=None)
    run_len = longest = 0
    for p in probes:
        run_len = 0 if p["ok"] else run_len + 1
        longest = max(longest, run_len)
    out["probes_longest_miss_run"] = longest
    failures = {}
    for p in probes:
        if not p["ok"]:
            failures[p["what"]] = failures.get(p["what"], 0) + 1
    out["probe_failures"] = failures
    out["available"] = bool(probes) and len(answered) == len(probes)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--probe-timeout", type=float, default=1.0)
    ap.add_argument("--no-probe", action="store_true")
    args = ap.parse_args()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: STOP.set())
    samples, probes = [], []
    t0 = time.monotonic()
    run(args, t0, samples, probes)
    out = summarize(samples, probes)
    # The series, thinned to at most ~120 points each so the JSON stays readable.
    step = max(1, len(samples) // 120)
    out["series"] = [{"t": s["t"], "rss_kib": s["VmRSS"], "fds": s["fds"], "threads": s["Threads"],
                      "cpu_s": s["cpu_s"], "load1": s["load1"]}
                     for s in samples[::step]]
    out["probe_misses"] = [p for p in probes if not p["ok"]][:50]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
