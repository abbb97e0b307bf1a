"""load_vs_wrk.sh's summary: medians per case and tool, and sluice-load / wrk ratios."""
from benchlib import fmt, median, table


def summary_load_vs_wrk(rows):
    groups = {}
    for r in rows:
        groups.setdefault(r["case"], {}).setdefault(r["tool"], []).append(r)
    summary, md_rows = [], []
    for case, tools in groups.items():
        med = {t: {k: median([x.get(k) for x in g]) for k in ("rps", "p50_ms", "p99_ms", "errors")}
               for t, g in tools.items()}
        w, s = med.get("wrk", {}), med.get("sluice-load", {})
        rps_ratio = s["rps"] / w["rps"] if s.get("rps") and w.get("rps") else None
        p99_ratio = s["p99_ms"] / w["p99_ms"] if s.get("p99_ms") and w.get("p99_ms") else None
        within = rps_ratio is not None and abs(rps_ratio - 1) <= 0.05
        summary.append({"case": case, "conns": tools[next(iter(tools))][0]["conns"], "wrk": w, "sluice_load": s,
                        "rps_ratio": rps_ratio, "p99_ratio": p99_ratio, "rps_within_5pct": within,
                        "runs": {t: len(g) for t, g in tools.items()}})
        md_rows.append([case, tools[next(iter(tools))][0]["conns"], len(tools.get("wrk", [])),
                        fmt(w.get("rps"), 0), fmt(s.get("rps"), 0), fmt(rps_ratio, 3),
                        fmt(w.get("p50_ms"), 2), fmt(s.get("p50_ms"), 2), fmt(w.get("p99_ms"), 2),
                        fmt(s.get("p99_ms"), 2), fmt(w.get("errors"), 0), fmt(s.get("errors"), 0),
                        "yes" if within else "no"])
    md = table(["case", "conns", "runs", "wrk req/s", "sluice-load req/s", "ratio", "wrk p50 ms", "sluice-load p50 ms",
                "wrk p99 ms", "sluice-load p99 ms", "wrk errors", "sluice-load errors", "req/s within 5%"], md_rows)
    return summary, md
