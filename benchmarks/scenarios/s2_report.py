#!/usr/bin/env python3
"""S2's summary table (via benchlib.py's report) and its plot.

  s2_report.py plot RESULT.json   req/s and p99 against connections, one line per server, one
                                  panel per route: RESULT.png and RESULT.svg (matplotlib)
"""
import json
import sys

from benchlib import fmt, pyplot, save_plot, table


def cpu_us(r):
    cpu, reqs = r.get("server_cpu_s"), r.get("requests")
    return cpu * 1e6 / reqs if cpu is not None and reqs else None


def summary_s2(rows):
    by_key = {(r["server"], r["route"], r["conns"]): r for r in rows if not r.get("skipped")}
    summary, md_rows = [], []
    for r in rows:
        s = dict(r)
        if r.get("skipped"):
            summary.append(s)
            md_rows.append([r["server"], r["route"], r["conns"], "skipped: " + r["skipped"]] + [""] * 10)
            continue
        fast = by_key.get((r["server"], "/fast", r["conns"]))
        nginx = by_key.get(("nginx", r["route"], r["conns"]))
        s["cpu_us_per_req"] = cpu_us(r)
        s["vs_own_fast"] = r["rps"] / fast["rps"] if fast and fast.get("rps") else None
        s["vs_nginx"] = r["rps"] / nginx["rps"] if nginx and nginx.get("rps") and r["server"] != "nginx" else None
        summary.append(s)
        md_rows.append([r["server"], r["route"], r["conns"], r["rps"], fmt(s["vs_own_fast"], 3), fmt(s["vs_nginx"], 2),
                        fmt(r.get("p50_ms"), 1), fmt(r.get("p99_ms"), 1), r.get("errors"), fmt(s["cpu_us_per_req"], 1),
                        fmt(100 * r["server_cpu_s"] / r["wall_s"] if r.get("wall_s") else None, 0),
                        r.get("threads"), r.get("rss_kib"), (r.get("watchdog") or "")[:90]])
    md = table(["server", "route", "conns", "req/s", "÷ own /fast", "÷ nginx", "p50 ms", "p99 ms", "errors",
                "CPU µs/req", "server CPU %", "threads", "RSS KiB", "watchdog (first line)"], md_rows)
    return summary, md


def plot(path):
    plt = pyplot("s2")
    if plt is None:
        return 1
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    rows = [r for r in data.get("summary", []) if not r.get("skipped") and r.get("rps")]
    routes = sorted({r["route"] for r in rows})
    servers = sorted({r["server"] for r in rows})
    fig, axes = plt.subplots(2, len(routes), figsize=(5 * len(routes), 8), squeeze=False)
    for col, route in enumerate(routes):
        for server in servers:
            pts = sorted((r["conns"], r["rps"], r.get("p99_ms")) for r in rows
                         if r["route"] == route and r["server"] == server)
            if not pts:
                continue
            axes[0][col].plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=server)
            axes[1][col].plot([p[0] for p in pts], [p[2] for p in pts], marker="o", label=server)
        axes[0][col].set_title(f"{route}: req/s")
        axes[1][col].set_title(f"{route}: p99 latency (ms)")
        for row in (0, 1):
            axes[row][col].set_xscale("log")
            axes[row][col].set_xlabel("connections")
            axes[row][col].grid(True, alpha=0.3)
        axes[1][col].set_yscale("log")
    axes[0][0].legend(fontsize="small")
    fig.suptitle(f"S2 — sluice-fastio vs nginx, {data.get('started_utc', '')}, commit {data.get('commit', '?')}")
    fig.tight_layout()
    save_plot(fig, path)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "plot":
        sys.exit(plot(sys.argv[2]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
