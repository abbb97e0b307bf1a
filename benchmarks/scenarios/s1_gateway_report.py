"""S1 through the gateway: the steady-window TPS and the summary (stdlib only), via benchlib.py:

  s1-window SAMPLES START END   stats_sampler.py's lines -> JSON: the backend's completions
                                between the samples nearest START and END, per second
"""
import json

from benchlib import fmt, median, read_rows, table


def window_tps(samples_path, start, end):
    samples = [s for s in read_rows(samples_path) if "served" in s]
    out = {"window_start_s": None, "window_end_s": None, "served_start": None, "served_end": None,
           "tps_window": None, "samples": len(samples),
           "served_total": max((s["served"] for s in samples), default=None)}
    if not samples:
        return out
    a = min(samples, key=lambda s: abs(s["t"] - start))
    b = min(samples, key=lambda s: abs(s["t"] - end))
    if b["t"] <= a["t"]:
        return out
    out.update({"window_start_s": a["t"], "window_end_s": b["t"], "served_start": a["served"],
                "served_end": b["served"], "tps_window": (b["served"] - a["served"]) / (b["t"] - a["t"])})
    # Completions per second over the whole run: the 3 s waves, for the reader of the JSON.
    per_s = {}
    prev = None
    for s in samples:
        if prev is not None:
            per_s[int(s["t"])] = per_s.get(int(s["t"]), 0) + s["served"] - prev
        prev = s["served"]
    out["served_per_s"] = [per_s.get(i, 0) for i in range(int(samples[-1]["t"]) + 1)]
    return out


def verdict(r):
    """The issue's expectation for the case: async styles >= 0.995 x model, 0 errors, p99 <= 3.10 s;
    sync within 2% of the model."""
    tps, model = r.get("tps_window"), r.get("model_tps")
    if tps is None or not model:
        return "no data"
    if r["backend"] == "nginx":
        return "peer"
    if r["style"] == "sync":
        ok = abs(tps / model - 1) <= 0.02
    else:
        ok = tps >= 0.995 * model and r["errors"] == 0 and (r.get("p99_ms") or 1e9) <= r.get("delay_ms", 3000) + 100
        if r.get("users", 0) >= 9000:  # issue 7 at 9,000 users: the gateway stays small
            ok = ok and (r.get("rss_kib") or 1e12) <= 64 * 1024 and (r.get("threads") or 1e9) <= r["threads_cfg"] + 4
    return "pass" if ok else "FAIL"


def errors_text(r):
    parts = [f"{k} {r[key]}" for k, key in (("c", "err_connect"), ("r", "err_read"), ("w", "err_write"),
                                             ("t", "err_timeout"), ("5xx", "non_2xx")) if r.get(key)]
    return f"{r['errors']}" + (f" ({', '.join(parts)})" if parts else "")


def cpu_us(r):
    cpu, reqs = r.get("gateway_cpu_s"), r.get("requests")
    return cpu * 1e6 / reqs if cpu is not None and reqs else None


def kib_per_in_flight(r):
    """(RSS halfway - RSS before the load) / the backend's in_flight halfway, in KiB."""
    rss, idle, n = r.get("rss_kib"), r.get("rss_idle_kib"), r.get("backend_in_flight_mid")
    return (rss - idle) / n if rss is not None and idle is not None and n else None


def mib(kib):
    return fmt(kib / 1024, 1) if kib is not None else "–"


def summary_s1_gateway(rows):
    summary, md_rows, groups = [], [], {}
    for r in rows:
        if r.get("skipped"):
            summary.append(r)
            md_rows.append([r["backend"], r.get("style", ""), "skipped: " + r["skipped"]] + [""] * 16)
            continue
        s = dict(r)
        s["ratio_to_model"] = r["tps_window"] / r["model_tps"] if r.get("tps_window") is not None else None
        s["verdict"] = verdict(r)
        summary.append(s)
        s["kib_per_in_flight"] = kib_per_in_flight(r)
        groups.setdefault((r["backend"], r["style"], r["users"]), []).append(s)
        md_rows.append([r["backend"], r["style"], r["users"], fmt(r.get("tps_window"), 1), r["model_tps"],
                        fmt(s["ratio_to_model"], 3), fmt(r.get("rps"), 1), errors_text(r), fmt(r.get("p50_ms"), 0),
                        fmt(r.get("p99_ms"), 0), fmt(r.get("lat_max_ms"), 0), r.get("backend_max_in_flight"),
                        fmt(cpu_us(r), 0), mib(r.get("rss_idle_kib")), mib(r.get("rss_kib")),
                        fmt(s["kib_per_in_flight"], 1), r.get("threads"), r.get("fds"), s["verdict"]])
    md = table(["backend", "style", "users", "TPS (window)", "model", "ratio", "client req/s", "errors", "p50 ms",
                "p99 ms", "max ms", "backend max in flight", "gateway CPU µs/req", "RSS idle MiB", "RSS MiB",
                "KiB / in flight", "threads", "fds", "expectation"], md_rows)
    repeated = {k: v for k, v in groups.items() if len(v) > 1}
    if repeated:
        med_rows = []
        for (backend, style, users), g in repeated.items():
            med_rows.append([backend, style, users, len(g), fmt(median([x.get("tps_window") for x in g]), 1),
                             fmt(median([x.get("ratio_to_model") for x in g]), 3),
                             fmt(median([x["errors"] for x in g]), 0), fmt(median([x.get("p99_ms") for x in g]), 0),
                             fmt(median([x.get("backend_max_in_flight") for x in g]), 0),
                             mib(median([x.get("rss_kib") for x in g])), fmt(median([x.get("threads") for x in g]), 0),
                             " ".join(x["verdict"] for x in g)])
        md += "\n\nMedians of the repeated cases:\n\n" + table(
            ["backend", "style", "users", "runs", "TPS (window)", "ratio", "errors", "p99 ms", "backend max in flight",
             "gateway RSS MiB", "threads", "expectation per run"], med_rows)
    return summary, md


def main(argv):
    if argv[0] == "s1-window":
        print(json.dumps(window_tps(argv[1], float(argv[2]), float(argv[3]))))
        return 0
    return 2
