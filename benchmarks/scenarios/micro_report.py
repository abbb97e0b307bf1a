#!/usr/bin/env python3
"""A markdown table of the medians in a Google Benchmark JSON file (run with repetitions)."""
import json
import sys


def human(value, unit):
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def main(path, command):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    ctx = data["context"]
    rows = [b for b in data["benchmarks"] if b.get("aggregate_name") == "median"]
    cvs = {b["run_name"]: b for b in data["benchmarks"] if b.get("aggregate_name") == "cv"}
    print(f"# Microbenchmarks, {ctx.get('date', '')}\n")
    print(f"`{command}` on {ctx.get('num_cpus')} × {ctx.get('mhz_per_cpu')} MHz, "
          f"load average {', '.join(f'{x:.2f}' for x in ctx.get('load_avg', []))}. "
          "Medians of the repetitions; cv is the coefficient of variation of the real time.\n")
    print("| benchmark | real time | CPU time | items/s | bytes/s | cv | other |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for b in rows:
        unit = b.get("time_unit", "ns")
        cv = cvs.get(b["run_name"], {}).get("real_time")
        skip = {"name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
                "threads", "aggregate_name", "aggregate_unit", "iterations", "real_time", "cpu_time",
                "time_unit", "items_per_second", "bytes_per_second", "repetition_index"}
        other = ", ".join(f"{k}={v:g}" for k, v in b.items() if k not in skip and isinstance(v, (int, float)))
        print(f"| {b['run_name']} | {b['real_time']:.1f} {unit} | {b['cpu_time']:.1f} {unit} | "
              f"{human(b['items_per_second'], '/s') if 'items_per_second' in b else ''} | "
              f"{human(b['bytes_per_second'], 'B/s') if 'bytes_per_second' in b else ''} | "
              f"{'' if cv is None else f'{cv * 100:.1f}%'} | {other} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "sluice-micro")
