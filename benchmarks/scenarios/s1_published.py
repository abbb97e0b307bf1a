"""Prints an s1_gateway result in the published S1 layout (../shared/SCENARIOS.md), with the
published Tomcat 6 and Jetty 7 rows beside the rows measured here.

  python3 s1_published.py RESULTS.json   -> a markdown table on stdout
"""
import json
import sys

# SCENARIOS.md, S1: 4 cores / 4 GB, LoadRunner, 3 s backend.
PUBLISHED = [
    (500, "Jetty 7", "async (resume)", 162.8, 3.008, "500", "100%"),
    (500, "Tomcat 6", "sync (500 threads)", 163.3, 3.005, "500", "100%"),
    (1000, "Jetty 7", "async (resume)", 317.06, 3.036, "1000", "100%"),
    (1000, "Tomcat 6", "sync", 163.3, 5.904, "500", "100%"),
    (1500, "Jetty 7", "sync", 163.2, 8.788, "–", "100%"),
    (1500, "Jetty 7", "async (complete)", 432.2, 3.312, "–", "100%"),
    (1500, "Jetty 7", "async (resume)", 423.6, 3.375, "–", "100%"),
    (1500, "Tomcat 6", "sync", 163.8, 8.75, "–", "100%"),
]


def container(r):
    if r["backend"] == "nginx":
        return "nginx (proxy_pass, keepalive, 1 worker)"
    if r["style"] == "sync":
        threads = r.get("threads_cfg")
        where = "threads" if r["backend"] == "blocking" else "pool workers"
        return f"sluice {r['backend']}, {threads} {where}"
    return f"sluice {r['backend']}, {r.get('threads_cfg')} I/O thread(s)"


def mode(r):
    return "proxy" if r["backend"] == "nginx" else {"sync": "sync", "async": "async (complete)",
                                                     "resume": "async (resume)", "co": "async (coroutine)"}[r["style"]]


def main(argv):
    data = json.load(open(argv[1], encoding="utf-8"))
    rows = [r for r in (data.get("summary") or data.get("runs") or []) if not r.get("skipped")]
    out = ["| users | container | mode | TPS | avg RT (s) | p99 (s) | max in-flight at backend | success | source |",
           "|---|---|---|---|---|---|---|---|---|"]
    for users in sorted({r["users"] for r in rows}):
        for p in PUBLISHED:
            if p[0] == users:
                out.append(f"| {p[0]:,} | {p[1]} | {p[2]} | {p[3]:g} | {p[4]:.3f} | – | {p[5]} | {p[6]} | published |")
        for r in rows:
            if r["users"] != users:
                continue
            reqs = r.get("requests") or 0
            ok = 100.0 * (reqs - r.get("errors", 0)) / reqs if reqs else 0.0
            avg = (r.get("lat_avg_ms") or 0) / 1000
            p99 = (r.get("p99_ms") or 0) / 1000
            tps = r.get("tps_window")
            out.append(f"| {users:,} | {container(r)} | {mode(r)} | {tps:.1f} | {avg:.3f} | {p99:.2f} | "
                       f"{r.get('backend_max_in_flight', '–')} | {ok:.1f}% | here (model {r.get('model_tps')}) |")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
