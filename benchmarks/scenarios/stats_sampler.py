#!/usr/bin/env python3
"""Samples sluice-slow-backend's GET /stats on a fixed schedule (stdlib only).

  stats_sampler.py --port P --duration S [--interval I] [--start-at EPOCH]

From its start, or from the wall-clock instant EPOCH (seconds since 1970, fractional) when given
(t = 0, taken as the start of the load), every I seconds (0.5) until S, one GET /stats on a
fresh connection; one JSON line per sample on stdout:
  {"t": seconds since start (the middle of the request), "served": .., "in_flight": ..,
   "max_in_flight": ..}
A sample that fails (timeout 1 s) is a line {"t": .., "error": "..."}: the schedule goes on.
The scenario runner takes its steady window from these lines (s1_gateway_report.window_tps).
--start-at lets the runner start this sampler before the load and the load at EPOCH: the
interpreter's start-up (0.4 s of CPU with a pyenv shim) then does not compete with the first
round of requests, whose latency it would add to.
"""
import argparse
import json
import sys
import time
import urllib.request


def sample(url, t0):
    start = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=1.0) as resp:
            body = json.loads(resp.read().decode("utf-8"))
        end = time.monotonic()
        return {"t": round((start + end) / 2 - t0, 3), "served": body.get("served"),
                "in_flight": body.get("in_flight"), "max_in_flight": body.get("max_in_flight")}
    except (OSError, ValueError) as e:
        return {"t": round(time.monotonic() - t0, 3), "error": str(e)[:100]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--start-at", type=float, default=None)
    args = ap.parse_args()
    url = f"http://127.0.0.1:{args.port}/stats"
    if args.start_at is not None:
        time.sleep(max(0.0, args.start_at - time.time()))
    t0 = time.monotonic()
    i = 0
    while i * args.interval <= args.duration:
        # A fixed schedule (not sleep(interval) after each sample): the samples stay on the
        # window's edges however long each request took.
        delay = t0 + i * args.interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        print(json.dumps(sample(url, t0)), flush=True)
        i += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
