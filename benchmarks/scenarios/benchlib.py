#!/usr/bin/env python3
"""Helpers for the scenario runners (stdlib only): parse wrk, build JSON rows, write results.

Subcommands (called from lib.sh):
  parse-wrk FILE                  wrk --latency output -> one JSON object
  row KEY=VALUE|@FILE ...         one JSON object; @FILE merges a JSON object (last line of FILE),
                                  KEY=@FILE nests one, KEY=lines:FILE a list of lines,
                                  KEY=kv:FILE a dict of key=value lines, KEY=str:V a string as is
  free-port                       an unused TCP port on 127.0.0.1
  report KIND ROWS META OUT_BASE  summary for KIND (plaintext|s1|memory|demo|hostile|s1_gateway|s2|s3), written to
                                  OUT_BASE.json and OUT_BASE.md; the markdown is printed
  sht-summary | parse-ab | hostile-line   the hostile scenario's (hostile_report.py)
  s1-window SAMPLES START END     S1 through the gateway: steady-window TPS (s1_gateway_report.py)
"""
import json
import re
import socket
import statistics
import sys

UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0, "h": 3600000.0}


def duration_ms(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text.strip())
    if not m:
        return None
    return float(m.group(1)) * UNITS_MS[m.group(2)]


def parse_wrk(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    out = {"requests": 0, "duration_s": 0.0, "rps": 0.0, "lat_avg_ms": None, "lat_max_ms": None,
           "p50_ms": None, "p75_ms": None, "p90_ms": None, "p99_ms": None,
           "err_connect": 0, "err_read": 0, "err_write": 0, "err_timeout": 0, "non_2xx": 0}
    m = re.search(r"Latency\s+(\S+)\s+(\S+)\s+(\S+)", text)
    if m:
        out["lat_avg_ms"] = duration_ms(m.group(1))
        out["lat_max_ms"] = duration_ms(m.group(3))
    for pct, value in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", text, re.M):
        out[f"p{pct}_ms"] = duration_ms(value)
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", text)
    if m:
        out["requests"] = int(m.group(1))
        out["duration_s"] = float(m.group(2)) * UNITS_MS[m.group(3)] / 1000.0
    m = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if m:
        out["rps"] = float(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        out["err_connect"], out["err_read"], out["err_write"], out["err_timeout"] = map(int, m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        out["non_2xx"] = int(m.group(1))
    out["errors"] = sum(out[k] for k in ("err_connect", "err_read", "err_write", "err_timeout", "non_2xx"))
    out["ok"] = bool(re.search(r"Requests/sec", text))
    return out


def typed(value):
    for conv in (int, float):
        try:
            return conv(value)
        except ValueError:
            pass
    return {"true": True, "false": False, "null": None}.get(value, value)


def load_json_file(path):
    try:
        text = open(path, encoding="utf-8").read().strip()
        return json.loads(text.splitlines()[-1]) if text else {}
    except (OSError, ValueError, IndexError):
        return {}


def read_lines(path):
    try:
        return [line.rstrip("\n") for line in open(path, encoding="utf-8") if line.strip()]
    except OSError:
        return []


def build_row(args):
    row = {}
    for arg in args:
        if arg.startswith("@"):
            row.update(load_json_file(arg[1:]))
            continue
        key, _, value = arg.partition("=")
        if value.startswith("@"):
            row[key] = load_json_file(value[1:])
        elif value.startswith("lines:"):
            row[key] = read_lines(value[6:])
        elif value.startswith("kv:"):
            row[key] = {k: typed(v) for k, _, v in (line.partition("=") for line in read_lines(value[3:]))}
        elif value.startswith("str:"):
            row[key] = value[4:]
        else:
            row[key] = typed(value)
    return row


def read_rows(path):
    rows = []
    try:
        for line in open(path, encoding="utf-8"):
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    except OSError:
        pass
    return rows


def fmt(value, digits=1):
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(c if isinstance(c, str) else fmt(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ratio(a, b):
    return a / b if a is not None and b else None


# --- plots (the report scripts' shared set-up) ----------------------------------------------------

def pyplot(who):
    """matplotlib.pyplot on the file-only backend, or None (said on stderr) when it is missing."""
    try:
        import matplotlib  # pylint: disable=import-outside-toplevel
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    except ImportError:
        print(f"{who}: no matplotlib (python3-matplotlib): no plot", file=sys.stderr)
        return None
    return plt


def save_plot(fig, result_path):
    """Writes fig beside RESULT.json as RESULT.png and RESULT.svg."""
    base = result_path[:-5] if result_path.endswith(".json") else result_path
    fig.savefig(base + ".png", dpi=100)
    fig.savefig(base + ".svg")
    print(f"plot: {base}.png, {base}.svg", file=sys.stderr)


# --- summaries, one per scenario kind ------------------------------------------------------------

def cpu_us_per_req(r):
    cpu, reqs = r.get("server_cpu_s"), r.get("requests")
    return cpu * 1e6 / reqs if cpu is not None and reqs else None


def summary_plaintext(rows):
    groups = {}
    for r in rows:
        if r.get("skipped"):
            groups.setdefault(r["backend"], {"skipped": r["skipped"]})
            continue
        groups.setdefault(r["backend"], {"runs": []}).setdefault("runs", []).append(r)
    base, base_by_run = None, {}
    if "nginx" in groups and groups["nginx"].get("runs"):
        base = median([r["rps"] for r in groups["nginx"]["runs"]])
        base_by_run = {r.get("run"): r["rps"] for r in groups["nginx"]["runs"]}
        base_cpu = median([cpu_us_per_req(r) for r in groups["nginx"]["runs"]])
    else:
        base_cpu = None
    summary, md_rows = [], []
    for backend, g in groups.items():
        if not g.get("runs"):
            summary.append({"backend": backend, "skipped": g["skipped"]})
            md_rows.append([backend, "skipped: " + g["skipped"]] + [""] * 10)
            continue
        runs = g["runs"]
        rps = [r["rps"] for r in runs]
        s = {"backend": backend, "runs": len(runs), "rps_median": median(rps), "rps_min": min(rps),
             "rps_max": max(rps), "p50_ms_median": median([r["p50_ms"] for r in runs]),
             "p99_ms_median": median([r["p99_ms"] for r in runs]),
             "errors_total": sum(r["errors"] for r in runs),
             "rss_kib_max": max((r.get("rss_kib") or 0) for r in runs),
             "threads": runs[-1].get("threads"),
             "ratio_to_nginx": ratio(median(rps), base),
             # Each run against the nginx run next to it in time: drift in the machine's load cancels.
             "paired_ratio_median": median([ratio(r["rps"], base_by_run.get(r.get("run"))) for r in runs]),
             "cpu_us_per_req_median": median([cpu_us_per_req(r) for r in runs])}
        s["cpu_ratio_to_nginx"] = ratio(s["cpu_us_per_req_median"], base_cpu)
        summary.append(s)
        md_rows.append([backend, s["runs"], s["rps_median"], f"{fmt(s['rps_min'])} – {fmt(s['rps_max'])}",
                        fmt(s["ratio_to_nginx"], 3), fmt(s["paired_ratio_median"], 3),
                        fmt(s["cpu_us_per_req_median"], 2), fmt(s["cpu_ratio_to_nginx"], 3), fmt(s["p50_ms_median"], 2), fmt(s["p99_ms_median"], 2),
                        s["errors_total"], s["rss_kib_max"]])
    md = table(["server", "runs", "median req/s", "range", "ratio to nginx", "paired ratio", "CPU us/req",
                "CPU ratio", "p50 ms", "p99 ms", "errors",
                "RSS KiB"], md_rows)
    runs_md = table(["run", "server", "req/s", "CPU us/req", "p50 ms", "p99 ms", "errors", "RSS KiB", "load avg"],
                    [[r.get("run", ""), r["backend"], r.get("rps"), fmt(cpu_us_per_req(r), 2), fmt(r.get("p50_ms"), 2),
                      fmt(r.get("p99_ms"), 2), r.get("errors"), r.get("rss_kib"), str(r.get("loadavg", ""))]
                     for r in rows if not r.get("skipped")])
    return summary, md + "\n\nEvery run, in the order run (alternating):\n\n" + runs_md


def summary_s1(rows):
    summary, md_rows = [], []
    for r in rows:
        if r.get("skipped"):
            summary.append(r)
            md_rows.append([r["backend"], r.get("mode", ""), r.get("users", "")] + ["skipped: " + r["skipped"]]
                           + [""] * 10)
            continue
        total = r["requests"] + r["errors"]
        s = dict(r)
        s["ratio_to_model"] = ratio(r["rps"], r["model_rps"])
        s["error_rate"] = r["errors"] / total if total else None
        summary.append(s)
        s["rounds"] = r["requests"] / min(r["users"], r.get("threads_cfg") or r["users"])
        md_rows.append([r["backend"], r["mode"], r["users"], r["rps"], r["model_rps"],
                        fmt(s["ratio_to_model"], 3), fmt(s["rounds"], 1), fmt(r["lat_avg_ms"], 0), fmt(r["p50_ms"], 0),
                        fmt(r["p99_ms"], 0), r["model_latency_ms"], f"{r['errors']} ({fmt(100 * (s['error_rate'] or 0), 2)}%)",
                        r.get("threads"), r.get("rss_kib")])
    md = table(["backend", "mode", "users", "req/s", "model req/s", "ratio", "rounds", "avg ms", "p50 ms", "p99 ms",
                "model ms", "errors", "threads", "RSS KiB"], md_rows)
    return summary, md


def per_conn(r):
    held = r.get("held") or 0
    return (r["rss_after_kib"] - r["rss_before_kib"]) / held if held else None


def summary_memory(rows):
    groups = {}
    for r in rows:
        groups.setdefault((r["backend"], r["state"]), {})[r.get("size", "full")] = r
    summary, md_rows = [], []
    for (backend, state), g in groups.items():
        full, small = g.get("full"), g.get("small")
        if full is None or full.get("skipped"):
            reason = (full or small or {}).get("skipped", "not run")
            summary.append({"backend": backend, "state": state, "skipped": reason})
            md_rows.append([backend, state, "skipped: " + reason] + [""] * 9)
            continue
        s = {"backend": backend, "state": state, "connections": full["connections"], "held": full.get("held"),
             "rss_before_kib": full["rss_before_kib"], "rss_after_kib": full["rss_after_kib"],
             "avg_kib": per_conn(full), "marginal_kib": None, "goal_kib": full.get("goal_kib"),
             "errors": full.get("errors"), "healthy_after": full.get("healthy_after")}
        if small and not small.get("skipped") and (full.get("held") or 0) > (small.get("held") or 0):
            grow_full = full["rss_after_kib"] - full["rss_before_kib"]
            grow_small = small["rss_after_kib"] - small["rss_before_kib"]
            s["marginal_kib"] = (grow_full - grow_small) / (full["held"] - small["held"])
            s["small_held"] = small["held"]
            s["small_avg_kib"] = per_conn(small)
            s["errors"] = (s["errors"] or 0) + (small.get("errors") or 0)
            s["healthy_after"] = bool(s["healthy_after"]) and bool(small.get("healthy_after"))
        summary.append(s)
        md_rows.append([backend, state, s["held"], s["rss_before_kib"], s["rss_after_kib"], fmt(s["avg_kib"], 2),
                        f"{fmt(s.get('small_avg_kib'), 2)} @ {fmt(s.get('small_held'))}" if small else "–",
                        fmt(s["marginal_kib"], 2), s["goal_kib"], s["errors"], s["healthy_after"]])
    md = table(["server", "state", "held", "RSS before KiB", "RSS held KiB", "avg KiB/conn", "avg at smaller N",
                "marginal KiB/conn", "goal KiB", "errors", "healthy after"], md_rows)
    return summary, md


def summary_demo(rows):
    md_rows = []
    for r in rows:
        if r.get("skipped"):
            md_rows.append([r["backend"], r.get("load", ""), "skipped: " + r["skipped"], "", ""])
        else:
            md_rows.append([r["backend"], r["load"], r["rps"], fmt(r["p99_ms"], 2), r["errors"]])
    return rows, table(["backend", "load", "req/s", "p99 ms", "errors"], md_rows)


SUMMARIES = {"plaintext": summary_plaintext, "s1": summary_s1, "memory": summary_memory, "demo": summary_demo}


def summary_hostile(rows):
    import hostile_report  # pylint: disable=import-outside-toplevel (it imports this module)
    return hostile_report.summary_hostile(rows)


SUMMARIES["hostile"] = summary_hostile


def summary_s1_gateway(rows):
    import s1_gateway_report  # pylint: disable=import-outside-toplevel (it imports this module)
    return s1_gateway_report.summary_s1_gateway(rows)


SUMMARIES["s1_gateway"] = summary_s1_gateway


def summary_s3(rows):
    import s3_report  # pylint: disable=import-outside-toplevel (it imports this module)
    return s3_report.summary_s3(rows)


SUMMARIES["s3"] = summary_s3


def summary_s2(rows):
    import s2_report  # pylint: disable=import-outside-toplevel (it imports this module)
    return s2_report.summary_s2(rows)


SUMMARIES["s2"] = summary_s2


def report(kind, rows_path, meta_path, out_base):
    rows = read_rows(rows_path)
    meta = load_json_file(meta_path)
    if kind not in SUMMARIES:
        # A newer scenario keeps its summary beside it: <kind>_report.py, summary_<kind>(rows).
        import importlib  # pylint: disable=import-outside-toplevel
        SUMMARIES[kind] = getattr(importlib.import_module(f"{kind}_report"), f"summary_{kind}")
    summary, md = SUMMARIES[kind](rows)
    meta.update({"summary": summary, "runs": rows})
    with open(out_base + ".json", "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    head = [f"# {meta.get('scenario', kind)} — {meta.get('started_utc', '')}", "",
            f"Host: {meta.get('nproc', '?')} CPUs ({meta.get('cpu', '?')}), kernel {meta.get('kernel', '?')}, "
            f"fd limit {meta.get('fd_limit', '?')}; commit {meta.get('commit', '?')}; "
            f"{meta.get('wrk', '')}; {meta.get('nginx', '')}", ""]
    if meta.get("params"):
        head += ["Parameters: " + ", ".join(f"{k}={v}" for k, v in meta["params"].items()), ""]
    text = "\n".join(head).rstrip("\n") + "\n\n" + md + "\n"
    notes = meta.get("notes") or []
    if notes:
        text += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    if meta.get("commands"):
        text += "\nCommands:\n\n```\n" + "\n".join(meta["commands"]) + "\n```\n"
    with open(out_base + ".md", "w", encoding="utf-8") as f:
        f.write(text)
    print(md)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd = argv[1]
    if cmd == "parse-wrk":
        print(json.dumps(parse_wrk(argv[2])))
    elif cmd == "row":
        print(json.dumps(build_row(argv[2:])))
    elif cmd == "free-port":
        print(free_port())
    elif cmd == "report":
        report(*argv[2:6])
    elif cmd == "s1-window":
        import s1_gateway_report  # pylint: disable=import-outside-toplevel
        return s1_gateway_report.main(argv[1:])
    elif cmd in ("sht-summary", "parse-ab", "hostile-line"):
        import hostile_report  # pylint: disable=import-outside-toplevel
        return hostile_report.main(argv[1:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
