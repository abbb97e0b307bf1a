"""The hostile-clients scenario's parsers and summary (stdlib only), used through benchlib.py:

  sht-summary PREFIX N   slowhttptest's PREFIX.<i>.csv / PREFIX.<i>.out of N processes -> JSON
  parse-ab FILE          ab's output -> JSON
  hostile-line ROWS      a one-line summary of the last row of ROWS (for the runner's log)
"""
import json
import re

from benchlib import fmt, read_rows, table

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def sht_summary(prefix, procs):
    """Connected counts summed per second over the processes; each one's exit status."""
    per_second, statuses, ended = {}, [], []
    for i in range(int(procs)):
        try:
            lines = open(f"{prefix}.{i}.csv", encoding="utf-8").read().splitlines()[1:]
        except OSError:
            lines = []
        for line in lines:
            cols = line.split(",")
            # slowhttptest 1.8.2 writes seconds,closed,pending,connected,... (its header says otherwise)
            if len(cols) >= 4 and cols[0].isdigit():
                s = per_second.setdefault(int(cols[0]), {"closed": 0, "pending": 0, "connected": 0})
                s["closed"] += int(cols[1])
                s["pending"] += int(cols[2])
                s["connected"] += int(cols[3])
        try:
            text = ANSI.sub("", open(f"{prefix}.{i}.out", encoding="utf-8", errors="replace").read())
        except OSError:
            text = ""
        m = re.search(r"Exit status:\s*(.+)", text)
        statuses.append(m.group(1).strip() if m else "no exit status (killed?)")
        m = re.search(r"Test ended on (\d+)", text)
        if m:
            ended.append(int(m.group(1)))
    peak = max(per_second.items(), key=lambda kv: kv[1]["connected"], default=(None, {}))
    return {"procs": int(procs), "connected_peak": peak[1].get("connected", 0), "connected_peak_at_s": peak[0],
            "exit_status": sorted(set(statuses)), "ended_s": max(ended, default=None),
            "per_second": [{"s": k, **v} for k, v in sorted(per_second.items())]}


def parse_ab(path):
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        text = ""

    def num(pattern, conv=int):
        m = re.search(pattern, text)
        return conv(m.group(1)) if m else None

    return {"complete": num(r"Complete requests:\s+(\d+)"), "failed": num(r"Failed requests:\s+(\d+)"),
            "non_2xx": num(r"Non-2xx responses:\s+(\d+)") or 0,
            "time_s": num(r"Time taken for tests:\s+([\d.]+)", float),
            "rps": num(r"Requests per second:\s+([\d.]+)", float),
            "failed_connect": num(r"\(Connect: (\d+),"), "failed_receive": num(r"Receive: (\d+),"),
            "failed_length": num(r"Length: (\d+),"), "failed_exceptions": num(r"Exceptions: (\d+)\)"),
            "interrupted": "interrupted" in text.lower() or "Complete requests" not in text,
            "errors": [line for line in text.splitlines() if line.startswith(("apr_", "ab: "))][:5]}


def slope_kib_per_s(series, until_s):
    pts = [(p["t"], p["rss_kib"]) for p in series or [] if until_s is None or p["t"] <= until_s]
    if len(pts) < 3:
        return None
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    mr = sum(r for _, r in pts) / n
    den = sum((t - mt) ** 2 for t, _ in pts)
    return sum((t - mt) * (r - mr) for t, r in pts) / den if den else None


def held(r):
    m = r.get("monitor") or {}
    return m["fds_peak"] - r["fds_base"] if m.get("fds_peak") is not None else None


def attack_cells(r):
    m, c = r.get("monitor") or {}, r.get("client") or {}
    back = r.get("fds_after") is not None and r["fds_after"] <= r["fds_base"]
    return [r["backend"], r["attack"], r.get("variant", "default"), held(r), c.get("connected_peak"),
            m.get("available"), f"{fmt(m.get('probes_pct'))}% of {fmt(m.get('probes'))}",
            fmt(m.get("probe_worst_ms"), 0), m.get("probes_longest_miss_run"),
            f"{fmt(r['rss_base_kib'])} → {fmt(m.get('rss_peak_kib'))} ({fmt(m.get('hwm_kib'))})",
            f"{fmt(r['fds_base'])} / {fmt(m.get('fds_peak'))} / {fmt(r.get('fds_after'))}",
            f"{'yes' if back else 'NO'} ({r.get('fds_return_s')} s)", m.get("threads_peak"),
            r.get("attack_s"), fmt(m.get("server_cpu_s"), 1), fmt(m.get("load1_max"), 1),
            "; ".join(c.get("exit_status") or []),
            f"{fmt(r.get('server_alive'))}/{fmt(r.get('healthy_after'))}/{fmt(r.get('stop_clean'))}"]


def flood_cells(r):
    m, c = r.get("monitor") or {}, r.get("client") or {}
    sent_mb = (c.get("bytes_sent") or 0) / 1e6
    end = c.get("server_rss_end_kib")
    growth = end - r["rss_base_kib"] if end is not None else None
    return [r["backend"], r.get("path"), r.get("set") or "–", c.get("answered"), c.get("rps"), fmt(sent_mb, 1),
            r["rss_base_kib"], end, m.get("rss_peak_kib"), growth,
            fmt(growth / sent_mb if sent_mb and growth is not None else None, 1),
            fmt(slope_kib_per_s(m.get("series"), c.get("duration_s")), 0),
            r.get("rss_after_kib"), f"{fmt(m.get('probes_pct'))}%", f"{r['fds_base']} / {r.get('fds_after')}",
            c.get("closed_by_server"), fmt(m.get("load1_max"), 1)]


def churn_cells(r):
    m, c = r.get("monitor") or {}, r.get("client") or {}
    return [r["backend"], c.get("complete"), c.get("failed"), c.get("non_2xx"), c.get("rps"), c.get("time_s"),
            r["rss_base_kib"], m.get("rss_peak_kib"), r.get("rss_after_kib"),
            (r.get("rss_after_kib") or 0) - r["rss_base_kib"], f"{r['fds_base']} / {r.get('fds_after')}",
            (r.get("fds_after") or 0) - r["fds_base"], f"{fmt(m.get('probes_pct'))}%",
            fmt(m.get("probe_worst_ms"), 0), fmt(m.get("server_cpu_s"), 1), fmt(m.get("load1_max"), 1)]


ATTACK_HEAD = ["backend", "attack", "variant", "held", "client peak", "available", "probes answered",
               "worst probe ms", "longest miss (probes)", "RSS base → peak KiB (HWM)", "fds base / peak / after",
               "fds back", "threads peak", "attack s", "server CPU s", "load max", "slowhttptest exit", "alive / healthy / clean stop"]
FLOOD_HEAD = ["backend", "path", "set", "answered", "req/s", "MB sent", "RSS base KiB", "RSS end KiB",
              "RSS peak KiB", "growth KiB", "growth KiB per MB sent", "slope KiB/s", "RSS after close KiB",
              "probes answered", "fds base / after", "closed by server", "load max"]
CHURN_HEAD = ["backend", "connections", "failed", "non-2xx", "conn/s", "time s", "RSS base KiB", "RSS peak KiB",
              "RSS after KiB", "growth KiB", "fds base / after", "fds leaked", "probes answered", "worst probe ms", "server CPU s", "load max"]


def summary_hostile(rows):
    parts = []
    for phase, head, cells, title in (("attack", ATTACK_HEAD, attack_cells, "slowhttptest attacks"),
                                      ("flood", FLOOD_HEAD, flood_cells, "Pipelining flood"),
                                      ("churn", CHURN_HEAD, churn_cells, "Connection churn")):
        selected = [r for r in rows if r.get("phase") == phase]
        if not selected:
            continue
        md_rows = [[r["backend"], "skipped: " + r["skipped"]] + [""] * (len(head) - 2) if r.get("skipped")
                   else cells(r) for r in selected]
        parts.append(f"## {title}\n\n" + table(head, md_rows))
    # The summary keeps everything but the long series (they stay in "runs").
    summary = []
    for r in rows:
        s = {k: v for k, v in r.items() if k not in ("monitor", "client")}
        s.update({f"monitor_{k}": v for k, v in (r.get("monitor") or {}).items() if k not in ("series", "probe_misses")})
        s.update({f"client_{k}": v for k, v in (r.get("client") or {}).items() if k != "per_second"})
        summary.append(s)
    return summary, "\n\n".join(parts)


def hostile_line(rows_path):
    rows = read_rows(rows_path)
    if not rows:
        return "no row"
    r = rows[-1]
    if r.get("skipped"):
        return "skipped: " + r["skipped"]
    m, c = r.get("monitor") or {}, r.get("client") or {}
    base = (f"probes {fmt(m.get('probes_pct'))}% (worst {fmt(m.get('probe_worst_ms'), 0)} ms), RSS "
            f"{r['rss_base_kib']} -> peak {m.get('rss_peak_kib')} KiB, fds {r['fds_base']} -> peak "
            f"{m.get('fds_peak')} -> {r.get('fds_after')}")
    if r["phase"] == "attack":
        return f"held {held(r)} (client {c.get('connected_peak')}), {base}, exit {c.get('exit_status')}"
    if r["phase"] == "flood":
        return (f"{c.get('answered')} answered, {c.get('bytes_sent')} B sent, RSS at the end "
                f"{c.get('server_rss_end_kib')}; {base}")
    return f"{c.get('complete')} done, {c.get('failed')} failed, {c.get('rps')} conn/s; {base}"


def main(argv):
    if argv[0] == "sht-summary":
        print(json.dumps(sht_summary(argv[1], argv[2])))
    elif argv[0] == "parse-ab":
        print(json.dumps(parse_ab(argv[1])))
    elif argv[0] == "hostile-line":
        print(hostile_line(argv[1]))
    else:
        return 2
    return 0
