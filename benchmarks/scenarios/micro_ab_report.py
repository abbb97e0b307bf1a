#!/usr/bin/env python3
"""micro_ab.sh's table: per benchmark, the medians of A and of B and the median of the paired ratios."""
import glob
import json
import os
import statistics
import sys


def main(directory, command):
    runs = {}  # benchmark -> pair -> {"a": ns, "b": ns}
    loads = []
    for path in glob.glob(os.path.join(directory, "*.json")):
        side, pair = os.path.basename(path)[:-5].split("-")
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        loads.extend(data["context"].get("load_avg", [])[:1])
        for b in data["benchmarks"]:
            runs.setdefault(b["run_name"], {}).setdefault(int(pair), {})[side] = b["real_time"]
    print("# Microbenchmarks A/B\n")
    print(f"`{command}`: A and B alternate, one run each per pair, on one pinned core. "
          f"Load average at the runs: {min(loads):.2f}–{max(loads):.2f}. B/A < 1: B is faster.\n")
    print("| benchmark | A median | B median | B/A, median of the paired ratios | min–max ratio | pairs |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, pairs in sorted(runs.items()):
        a = [p["a"] for p in pairs.values() if "a" in p]
        b = [p["b"] for p in pairs.values() if "b" in p]
        ratios = [p["b"] / p["a"] for p in pairs.values() if "a" in p and "b" in p]
        med = lambda xs: f"{statistics.median(xs):.1f} ns" if xs else "—"
        spread = f"{min(ratios):.2f}–{max(ratios):.2f}" if ratios else "—"
        ratio = f"{statistics.median(ratios):.3f}" if ratios else "— (only in one build)"
        print(f"| {name} | {med(a)} | {med(b)} | {ratio} | {spread} | {len(ratios)} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "micro_ab.sh")
