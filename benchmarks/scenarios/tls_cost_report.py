"""tls_cost.sh's helpers: parse openssl s_time output, and the summary (medians, ratios to nginx).

  tls_cost_report.py parse-stime WALL_S FILE...   s_time outputs of clients run at once -> JSON
"""
import json
import re
import sys

from benchlib import fmt, median, ratio, table


def parse_stime(wall_s, paths):
    ops = reused = full = 0
    failed = []
    for path in paths:
        text = open(path, encoding="utf-8", errors="replace").read()
        # The last "N connections in X real seconds" is the timed phase (-new or -reuse).
        counts = re.findall(r"^(\d+) connections in [\d.]+ real seconds", text, re.M)
        if counts:
            ops += int(counts[-1])
        else:
            failed.append(path)
        # -reuse: one '*' (the first, full handshake) then an 'r' per resumed one, '*' per full one.
        progress = text.split("Now timing with session id reuse.", 1)[-1]
        progress = "".join(line for line in progress.splitlines() if re.fullmatch(r"[*r]+", line))
        reused += progress.count("r")
        full += progress.count("*")
    return {"ops": ops, "wall_s": wall_s, "rate": ops / wall_s if wall_s > 0 else None, "reused": reused,
            "not_reused": full, "clients": len(paths), "clients_failed": len(failed), "errors": len(failed)}


def cpu_us(r):
    cpu, ops = r.get("server_cpu_s"), r.get("ops")
    return cpu * 1e6 / ops if cpu is not None and ops else None


def summary_tls_cost(rows):
    groups, by_run, order = {}, {}, []
    for r in rows:
        r["cpu_us_per_op"] = cpu_us(r)
        key = (r["row"], r["server"])
        if key not in groups:
            order.append(key)
        groups.setdefault(key, []).append(r)
        by_run[(r["row"], r["server"], r["run"])] = r
    summary, md_rows = [], []
    for key in order:
        row, server = key
        g = groups[key]
        nginx = groups.get((row, "nginx"), [])
        s = {"row": row, "server": server, "runs": len(g), "rate_median": median([x.get("rate") for x in g]),
             "cpu_us_median": median([x["cpu_us_per_op"] for x in g]),
             "errors": sum(x.get("errors") or 0 for x in g)}
        s["rate_ratio"] = ratio(s["rate_median"], median([x.get("rate") for x in nginx]))
        s["cpu_ratio"] = ratio(s["cpu_us_median"], median([x["cpu_us_per_op"] for x in nginx]))
        # Each run against the nginx run next to it in time: drift in the machine's load cancels.
        paired = [(x, by_run.get((row, "nginx", x["run"]))) for x in g]
        s["paired_rate_ratio"] = median([ratio(x.get("rate"), n.get("rate")) for x, n in paired if n])
        s["paired_cpu_ratio"] = median([ratio(x["cpu_us_per_op"], n["cpu_us_per_op"]) for x, n in paired if n])
        if server != "nginx":
            s["goal_met"] = bool(s["paired_rate_ratio"] and s["paired_rate_ratio"] >= 1.0 and s["paired_cpu_ratio"]
                                 and s["paired_cpu_ratio"] <= 0.9)
        summary.append(s)
        md_rows.append([row, server, s["runs"], fmt(s["rate_median"], 0), fmt(s["cpu_us_median"], 1),
                        fmt(s["rate_ratio"], 3), fmt(s["paired_rate_ratio"], 3), fmt(s["cpu_ratio"], 3),
                        fmt(s["paired_cpu_ratio"], 3), s["errors"], fmt(s.get("goal_met"))])
    md = table(["row", "server", "runs", "median ops/s", "CPU µs/op", "ops ratio", "paired ops ratio",
                "CPU ratio", "paired CPU ratio", "errors", "goal met"], md_rows)
    runs_md = table(["run", "row", "server", "ops/s", "ops", "CPU µs/op", "reused", "errors", "load avg"],
                    [[x["run"], x["row"], x["server"], fmt(x.get("rate"), 0), x.get("ops"), fmt(x["cpu_us_per_op"], 1),
                      x.get("reused", "–"), x.get("errors"), str(x.get("loadavg", ""))] for x in rows])
    return summary, md + "\n\nEvery run, in the order run (alternating):\n\n" + runs_md


def main(argv):
    if len(argv) >= 3 and argv[1] == "parse-stime":
        print(json.dumps(parse_stime(float(argv[2]), argv[3:])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
