"""proxy_cost.sh's summary: CPU per proxied request per run, medians, and the ratio to nginx."""
from benchlib import fmt, median, table


def us_per_req(r, key):
    cpu, reqs = r.get(key), r.get("requests")
    return cpu * 1e6 / reqs if cpu is not None and reqs else None


def summary_proxy_cost(rows):
    md_rows, groups = [], {}
    for r in rows:
        r["proxy_cpu_us_per_req"] = us_per_req(r, "proxy_cpu_s")
        r["upstream_cpu_us_per_req"] = us_per_req(r, "upstream_cpu_s")
        # The proxy's user-space share (utime); the rest of its CPU is the kernel's (stime).
        r["proxy_user_us_per_req"] = us_per_req(r, "proxy_user_cpu_s")
        r["proxy_sys_us_per_req"] = (r["proxy_cpu_us_per_req"] - r["proxy_user_us_per_req"]
                                     if r["proxy_cpu_us_per_req"] is not None and r["proxy_user_us_per_req"] is not None
                                     else None)
        groups.setdefault(r["proxy"], []).append(r)
        md_rows.append([r["proxy"], r["run"], fmt(r.get("rps"), 0), r.get("errors"), fmt(r.get("p99_ms"), 2),
                        fmt(r["proxy_cpu_us_per_req"], 1), fmt(r["proxy_user_us_per_req"], 1),
                        fmt(r["proxy_sys_us_per_req"], 1), fmt(r["upstream_cpu_us_per_req"], 1),
                        fmt((r.get("rss_kib") or 0) / 1024, 1)])
    md = table(["proxy", "run", "req/s", "errors", "p99 ms", "proxy CPU µs/req", "of it user", "of it kernel",
                "upstream CPU µs/req", "RSS MiB"],
               md_rows)
    med = {p: {"rps": median([x.get("rps") for x in g]),
               "cpu_us": median([x["proxy_cpu_us_per_req"] for x in g]),
               "user_us": median([x["proxy_user_us_per_req"] for x in g]),
               "sys_us": median([x["proxy_sys_us_per_req"] for x in g]),
               "p99_ms": median([x.get("p99_ms") for x in g]), "runs": len(g)} for p, g in groups.items()}
    nginx = next((v for k, v in med.items() if k.startswith("nginx")), None)
    summary = []
    med_rows = []
    for p, m in med.items():
        ratio = m["cpu_us"] / nginx["cpu_us"] if nginx and nginx["cpu_us"] and m["cpu_us"] else None
        summary.append(dict(m, proxy=p, cpu_ratio_to_nginx=ratio))
        med_rows.append([p, m["runs"], fmt(m["rps"], 0), fmt(m["p99_ms"], 2), fmt(m["cpu_us"], 1), fmt(ratio, 2),
                         fmt(m["user_us"], 1), fmt(m["sys_us"], 1)])
    md += "\n\nMedians:\n\n" + table(["proxy", "runs", "req/s", "p99 ms", "CPU µs/req", "ratio to nginx",
                                       "user µs/req", "kernel µs/req"], med_rows)
    return summary, md
