#!/usr/bin/env python3
"""S3's summary (via benchlib.py's report): one line per experiment in the published layout,
avg ms / error % / TPS per variant, beside the published sync and async figures; and a plot.

  s3_report.py plot RESULT.json   error % and average latency per experiment and variant
                                  (RESULT.png, RESULT.svg; matplotlib)
"""
import json
import sys

from benchlib import fmt, pyplot, save_plot, table

# SCENARIOS.md, S3 (seed 000): (api, users) -> (sync, async) as (avg ms, error %, TPS).
PUBLISHED = {
    ("list", 50): ((229, 0.0, 42.3), (351, 0.0, 39.2)),
    ("upload", 50): ((4477, 32.4, 6.5), (5953, 44.4, 5.6)),
    ("list", 200): ((293, 0.0, 158.8), (301, 0.0, 158.6)),
    ("upload", 20): ((2098, 9.0, 4.3), (1811, 2.0, 3.3)),
    ("list", 1000): ((1255, 0.0, 422.0), (1264, 0.0, 426.6)),
}
VARIANTS = ("sync", "async", "limited")


def cell(r):
    if r is None:
        return "–"
    if r.get("skipped"):
        return "skipped"
    return f"{fmt(r.get('avg_ms'), 0)} / {fmt(r.get('error_pct'), 1)}% / {fmt(r.get('throughput'), 1)}"


def published(api, users, i):
    p = PUBLISHED.get((api, users))
    return "–" if p is None else f"{p[i][0]:,} / {p[i][1]}% / {p[i][2]}"


def summary_s3(rows):
    keys = []
    by = {}
    for r in rows:
        key = (r["api"], r["users"])
        if key not in keys:
            keys.append(key)
        by[(key, r["variant"])] = r
    md_rows = []
    for api, users in keys:
        loops = next((by[((api, users), v)].get("loops") for v in VARIANTS if ((api, users), v) in by), "")
        md_rows.append([f"{users} users × {loops}", "GET list" if api == "list" else "POST 74 KB"]
                       + [cell(by.get(((api, users), v))) for v in VARIANTS]
                       + [published(api, users, 0), published(api, users, 1)])
    md = table(["experiment", "API", "sync avg ms / err / TPS", "async", "async limited", "published sync",
                "published async"], md_rows)
    detail = []
    for r in rows:
        if r.get("skipped"):
            continue
        kinds = r.get("errors_by_kind") or {}
        b = r.get("backend") or {}
        detail.append([r["variant"], r["api"], r["users"], r.get("samples"), fmt(r.get("p50_ms"), 0),
                       fmt(r.get("p99_ms"), 0), fmt(r.get("max_ms"), 0),
                       ", ".join(f"{k} {v}" for k, v in kinds.items() if v) or "0",
                       b.get("max_in_flight"), r.get("max_threads"), r.get("max_rss_kib"),
                       fmt(r.get("gateway_cpu_s"), 2)])
    md += "\n\nPer run:\n\n" + table(["variant", "API", "users", "samples", "p50 ms", "p99 ms", "max ms", "errors by kind",
                                     "backend max in flight", "gateway max threads", "gateway max RSS KiB",
                                     "gateway CPU s"], detail)
    return rows, md


def plot(path):
    plt = pyplot("s3")
    if plt is None:
        return 1
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    rows = [r for r in data.get("runs", []) if not r.get("skipped")]
    keys = []
    for r in rows:
        if (r["api"], r["users"]) not in keys:
            keys.append((r["api"], r["users"]))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(VARIANTS)
    for i, v in enumerate(VARIANTS):
        errs, avgs = [], []
        for key in keys:
            r = next((x for x in rows if (x["api"], x["users"]) == key and x["variant"] == v), None)
            errs.append(r.get("error_pct", 0) if r else 0)
            avgs.append(r.get("avg_ms", 0) if r else 0)
        xs = [k + (i - 1) * width for k in range(len(keys))]
        axes[0].bar(xs, errs, width, label=v)
        axes[1].bar(xs, avgs, width, label=v)
    labels = [f"{'GET list' if a == 'list' else 'POST 74 KB'}\n{u} users" for a, u in keys]
    for ax, title in ((axes[0], "error %"), (axes[1], "average latency (ms)")):
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(labels, fontsize="small")
        ax.set_title(title)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].legend()
    params = data.get("params", {})
    fig.suptitle(f"S3 — gateway to a {params.get('BANDWIDTH_MBIT', '?')} Mbit/s object store, upstream timeout "
                 f"{params.get('RESPONSE_TIMEOUT_MS', '?')} ms, limit {params.get('LIMIT', '?')}; "
                 f"{data.get('started_utc', '')}")
    fig.tight_layout()
    save_plot(fig, path)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "plot":
        sys.exit(plot(sys.argv[2]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
