#!/usr/bin/env python3
"""S4's summary (via benchlib.py's report): one line per experiment, one instance against three,
avg ms / error % / TPS beside the published figures; the rolling restart; and a plot.

  s4_report.py plot RESULT.json   error % and TPS per experiment and topology, published
                                  figures marked (RESULT.png, RESULT.svg; matplotlib)
"""
import json
import sys

from benchlib import fmt, pyplot, save_plot, table

# SCENARIOS.md S4 and the seed (002): (api, users) -> {topology: (avg ms, error %, TPS)}, None
# where the seed gives no figure. Reads were 5 loops per user; the three-replica read at 200
# users was 45.9 QPS ("about 64% of the single instance").
PUBLISHED = {
    ("upload", 80): {"one": (None, 36.75, 26.3), "three": (4457, 0.0, 14.5)},
    ("read", 200): {"one": None, "three": (None, None, 45.9)},
    ("read", 500): {"one": (None, 0.0, 128.5), "three": (None, 91.28, None)},
    ("read", 800): {"one": (None, 0.04, 134.9), "three": None},
}
TOPOLOGIES = ("one", "three")
API = {"upload": "POST 74 KB (limited)", "read": "GET list"}


def cell(r):
    if r is None:
        return "–"
    if r.get("skipped"):
        return "skipped"
    return f"{fmt(r.get('avg_ms'), 0)} / {fmt(r.get('error_pct'), 2)}% / {fmt(r.get('throughput'), 1)}"


def published(api, users, topology):
    p = (PUBLISHED.get((api, users)) or {}).get(topology)
    if p is None:
        return "–"
    return " / ".join("?" if v is None else (f"{v}%" if i == 1 else f"{v:,}") for i, v in enumerate(p))


def shape(r):
    if r["api"] == "upload":
        return f"{r['users']} users × {r.get('loops')}, wait {r.get('limit_wait_ms')} ms"
    return f"{r['users']} users, {r.get('duration_s')} s"


def summary_s4(rows):
    points = [r for r in rows if r.get("api") != "roll"]
    keys = []
    by = {}
    for r in points:
        key = (r["api"], r["users"], r.get("limit_wait_ms") if r["api"] == "upload" else None)
        if key not in keys:
            keys.append(key)
        by[(key, r["topology"])] = r
    md_rows = []
    for key in keys:
        api, users, _ = key
        first = next(by[(key, t)] for t in TOPOLOGIES if (key, t) in by)
        md_rows.append([shape(first), API.get(api, api)]
                       + [cell(by.get((key, t))) for t in TOPOLOGIES]
                       + [published(api, users, t) for t in TOPOLOGIES])
    one_cpu = next((r.get("cpus_each") for r in points if r["topology"] == "one"), "?")
    small_cpu = next((r.get("cpus_each") for r in points if r["topology"] == "three"), "?")
    md = table(["experiment", "API", f"one × {one_cpu} CPU: avg ms / err / TPS", f"three × {small_cpu} CPU",
                "published one (1.5 CPU)", "published three (3 × 0.5)"], md_rows)
    detail = []
    for r in points:
        kinds = r.get("errors_by_kind") or {}
        thr = r.get("throttling") or {}
        detail.append([r["topology"], r["api"], r["users"], r.get("samples"), fmt(r.get("p50_ms"), 0),
                       fmt(r.get("p99_ms"), 0), fmt(r.get("max_ms"), 0),
                       ", ".join(f"{k} {v}" for k, v in kinds.items() if v) or "0",
                       r.get("limiter_timed_out"), r.get("lb_retries"),
                       f"{thr.get('nr_throttled', '?')}/{thr.get('nr_periods', '?')}",
                       fmt(thr.get("throttled_s"), 2), fmt(r.get("gateway_cpu_s"), 2), r.get("loadavg")])
    md += "\n\nPer run:\n\n" + table(["topology", "API", "users", "samples", "p50 ms", "p99 ms", "max ms",
                                     "errors by kind", "waiters timed out", "haproxy retries",
                                     "throttled periods", "throttled s", "gateway CPU s", "loadavg"], detail)
    for r in (x for x in rows if x.get("api") == "roll"):
        md += (f"\n\nRolling restart of the three under load, {r.get('mode')} mode ({r.get('duration_s')} s; "
               f"restarts done at {r.get('restarts_done_s')} s):\n\n")
        md += table(["load", "samples", "failed", "errors by kind", "TPS", "avg ms", "p99 ms", "max ms"],
                    [[name, (r.get(name) or {}).get("samples"), (r.get(name) or {}).get("errors"),
                      ", ".join(f"{k} {v}" for k, v in ((r.get(name) or {}).get("errors_by_kind") or {}).items()
                                if v) or "0",
                      fmt((r.get(name) or {}).get("throughput"), 1), fmt((r.get(name) or {}).get("avg_ms"), 0),
                      fmt((r.get(name) or {}).get("p99_ms"), 0), fmt((r.get(name) or {}).get("max_ms"), 0)]
                     for name in ("reads", "uploads")])
        md += "\n\n" + table(["instance", "exit code", "haproxy drain s", "SIGTERM to exit s", "start to /readyz s",
                              "/readyz to haproxy UP s"],
                             [[x.get("instance"), x.get("exit_code"), fmt(x.get("lb_drain_s"), 2), fmt(x.get("drain_s"), 2),
                               fmt(x.get("ready_s"), 2), fmt(x.get("lb_up_s"), 2)] for x in r.get("restarts", [])])
        md += (f"\n\nhaproxy: {r.get('lb_requests')} requests to the servers, {r.get('lb_retries')} retries, "
               f"{r.get('lb_redispatches')} redispatches, {r.get('lb_econ')} connect errors, "
               f"{r.get('lb_eresp')} response errors, {r.get('lb_5xx')} 5xx.")
    return rows, md


def plot(path):
    plt = pyplot("s4")
    if plt is None:
        return 1
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    rows = [r for r in data.get("runs", []) if r.get("api") != "roll" and not r.get("skipped")]
    keys = []
    def key_of(r):
        return (r["api"], r["users"], r.get("limit_wait_ms") if r["api"] == "upload" else None)

    for r in rows:
        if key_of(r) not in keys:
            keys.append(key_of(r))
    rolls = [r for r in data.get("runs", []) if r.get("api") == "roll"]
    fig, axes = plt.subplots(1, 3 if rolls else 2, figsize=(19 if rolls else 13, 5),
                             gridspec_kw={"width_ratios": [3, 3, 2] if rolls else [1, 1]})
    width = 0.38
    colors = {"one": "tab:blue", "three": "tab:orange"}
    for i, t in enumerate(TOPOLOGIES):
        xs = [k + (i - 0.5) * width for k in range(len(keys))]
        errs, tps, pub_err, pub_tps = [], [], [], []
        for key in keys:
            r = next((x for x in rows if key_of(x) == key and x["topology"] == t), None)
            errs.append(r.get("error_pct", 0) if r else 0)
            tps.append(r.get("throughput", 0) if r else 0)
            p = (PUBLISHED.get(key[:2]) or {}).get(t)
            pub_err.append(p[1] if p and p[1] is not None else None)
            pub_tps.append(p[2] if p and p[2] is not None else None)
        label = {"one": "one instance", "three": "three replicas"}[t]
        axes[0].bar(xs, errs, width, label=label, color=colors[t])
        axes[1].bar(xs, tps, width, label=label, color=colors[t])
        for ax, pub in ((axes[0], pub_err), (axes[1], pub_tps)):
            px = [x for x, v in zip(xs, pub) if v is not None]
            py = [v for v in pub if v is not None]
            if px:
                ax.scatter(px, py, marker="D", color="black", zorder=3,
                           label="published" if t == "one" else None)
    labels = [f"POST\n{u} users\nwait {w / 1000:g} s" if a == "upload" else f"GET list\n{u} users"
              for a, u, w in keys]
    for ax, title in ((axes[0], "error %"), (axes[1], "TPS (log)")):
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(labels, fontsize="x-small")
        ax.set_title(title)
        ax.grid(True, axis="y", alpha=0.3)
    axes[1].set_yscale("log")
    axes[0].set_ylim(bottom=0)
    axes[0].legend(fontsize="small")
    if rolls:
        ax = axes[2]
        names = [f"{r.get('mode')}" for r in rolls]
        for j, load in enumerate(("reads", "uploads")):
            failed = [(r.get(load) or {}).get("errors", 0) for r in rolls]
            xs = [k + (j - 0.5) * 0.38 for k in range(len(rolls))]
            bars = ax.bar(xs, failed, 0.38, label=load)
            ax.bar_label(bars, fontsize="small")
        ax.set_xticks(range(len(rolls)))
        ax.set_xticklabels([f"rolling restart\n{n}" for n in names], fontsize="small")
        ax.set_title("failed requests during a rolling restart")
        ax.legend(fontsize="small")
    params = data.get("params", {})
    fig.suptitle(f"S4 — one gateway at {params.get('ONE_CPU', '?')} CPU vs three at {params.get('SMALL_CPU', '?')} "
                 f"behind haproxy; uploads: {params.get('LIMIT', '?')} permits/instance, "
                 f"{params.get('BANDWIDTH_MBIT', '?')} Mbit/s shared uplink; "
                 f"{data.get('started_utc', '')}", fontsize="medium")
    fig.tight_layout()
    save_plot(fig, path)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "plot":
        sys.exit(plot(sys.argv[2]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
