"""S1 plots from an s1_gateway results JSON: TPS vs users (with the users/delay model line and the
sync cap) and p99 latency vs users, one line per backend:style (nginx:proxy the peer).

  python3 s1_plot.py RESULTS.json OUT_BASE   -> OUT_BASE-tps.{png,svg}, OUT_BASE-p99.{png,svg}

Needs matplotlib (Debian: python3-matplotlib; scripts/bootstrap installs it).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def lines(rows, key):
    out = {}
    for r in rows:
        if r.get("skipped") or r.get(key) is None:
            continue
        out.setdefault(f'{r["backend"]}:{r["style"]}', {}).setdefault(r["users"], []).append(r[key])
    # The median of repeated points.
    return {k: sorted((u, sorted(v)[len(v) // 2]) for u, v in pts.items()) for k, pts in out.items()}


def plot(rows, key, ylabel, title, out_base, model=False):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    users = sorted({r["users"] for r in rows if not r.get("skipped")})
    if model and users:
        delay_s = rows[0].get("delay_ms", 3000) / 1000
        ax.plot(users, [u / delay_s for u in users], "k--", linewidth=1, label=f"model: users / {delay_s:g} s")
        ax.axhline(500 / delay_s, color="grey", linestyle=":", linewidth=1,
                   label=f"sync cap: 500 threads / {delay_s:g} s")
    for name, pts in sorted(lines(rows, key).items()):
        style = "s-" if name.startswith("nginx") else "o-"
        ax.plot([u for u, _ in pts], [v for _, v in pts], style, label=name)
    ax.set_xlabel("users (concurrent connections)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{out_base}.{ext}", dpi=110)
        print(f"plot: {out_base}.{ext}")
    plt.close(fig)


def main(argv):
    data = json.load(open(argv[1], encoding="utf-8"))
    rows = data.get("summary") or data.get("runs") or []
    if not rows:
        print("s1_plot: no rows", file=sys.stderr)
        return 1
    plot(rows, "tps_window", "TPS (steady window)", f"S1: gateway to a {rows[0].get('delay_ms', 3000) / 1000:g} s backend, TPS", argv[2] + "-tps",
         model=True)
    plot([dict(r, p99_s=r["p99_ms"] / 1000) for r in rows if r.get("p99_ms") is not None],
         "p99_s", "p99 latency (s)", "S1: p99 latency", argv[2] + "-p99")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
