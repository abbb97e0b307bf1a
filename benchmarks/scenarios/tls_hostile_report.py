"""tls_hostile.sh's summary: per backend, how the failed handshakes ended and the fd check."""
from benchlib import fmt, table


def summary_tls_hostile(rows):
    md_rows = []
    for r in rows:
        if r.get("skipped"):
            md_rows.append([r["backend"], "skipped: " + r["skipped"]] + [""] * 8)
            continue
        outcomes = r.get("outcomes") or {}
        ends = {}
        for per_kind in outcomes.values():
            for k, v in per_kind.items():
                ends[k] = ends.get(k, 0) + v
        r["passed"] = r.get("client_rc") == 0 and bool(r.get("alive_after"))
        md_rows.append([r["backend"], fmt(r.get("count")), ", ".join(f"{k} {v}" for k, v in sorted(ends.items())),
                        f"{r.get('silent_closed_by_server')}/{r.get('silent')} in {r.get('silent_closed_s')} s",
                        f"{r.get('fds_baseline')} → {r.get('fds_right_after')} → {r.get('fds_end')}",
                        fmt(r.get("fds_back_s"), 2), fmt(r.get("healthy_after")), fmt(r.get("alive_after")),
                        fmt(r.get("timeouts")), fmt(r["passed"])])
    md = table(["backend", "bad handshakes", "how they ended", "stalled closed by server", "fds baseline → after → end",
                "s to baseline", "GET / after", "alive", "hangs", "pass"], md_rows)
    per_kind = []
    for r in rows:
        for kind, o in (r.get("outcomes") or {}).items():
            per_kind.append([r["backend"], kind, ", ".join(f"{k} {v}" for k, v in sorted(o.items()))])
    return rows, md + "\n\nPer kind:\n\n" + table(["backend", "kind", "outcomes"], per_kind)
