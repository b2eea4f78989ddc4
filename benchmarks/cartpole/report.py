"""The CartPole experiment's report: the table and the goals as text, results.json and
results.csv, and the figures fig5.png (the paper's Fig. 5) and crossover.png (throughput over
the number of environments)."""

from __future__ import annotations

import csv
import json
import os
from dataclasses import asdict

from benchmarks.cartpole.experiment import Results

# The paper's Fig. 5 (Snider & Liang 2023, Sec. V), normalised to its "concat (baseline)"
# bar, which is our `pool` under XLA's rules: the in-loop random numbers cost 1.87x; the
# patched XLA gains 1.10x; no concat 3.41x; unroll 10.56x; hand CUDA 2.7x the best XLA.
PAPER_FIG5 = {("baseline", "xla"): 1 / 1.87, ("pool", "xla"): 1.0,
              ("pool", "xla+concat"): 1.10, ("no_concat", "xla"): 3.41,
              ("unroll", "xla"): 10.56, ("cuda hand", "-"): 10.56 * 2.7,
              ("torch eager", "-"): 0.13, ("torch.compile", "-"): 1.97}

COLUMNS = ("impl", "variant", "profile", "lowering", "env_steps_per_s", "x_baseline", "x_fig5",
           "kernels_per_step", "compile_s", "trajectories")
HEADERS = ("impl", "variant", "profile", "threefry", "env-steps/s", "x Fig.2", "x Fig.5",
           "kernels/step", "compile s", "trajectories")


def _fmt(value, column: str) -> str:
    if value is None:
        return "-"
    if column == "env_steps_per_s":
        return f"{value:.3g}"
    if column in ("x_baseline", "x_fig5"):
        return f"{value:.2f}"
    if column == "kernels_per_step":
        return f"{value:.3g}"
    if column == "compile_s":
        return f"{value:.2f}"
    return str(value)


def table(rows) -> str:
    cells = [HEADERS] + [tuple(_fmt(getattr(r, c), c) for c in COLUMNS) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(HEADERS))]
    lines = []
    for k, row in enumerate(cells):
        lines.append("  ".join(v.ljust(w) if i < 4 or i == 9 else v.rjust(w)
                               for i, (v, w) in enumerate(zip(row, widths))).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(rows) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(getattr(r, c), c) for c in COLUMNS) + " |")
    return "\n".join(lines)


def goals_text(goals) -> str:
    lines = []
    for g in goals:
        if g["value"] is None:
            state, value = "not measured", "-"
        else:
            state, value = ("met" if g["met"] else "MISSED"), f"{g['value']:.2f}"
        lines.append(f"  {g['goal']}: {value} (goal {g['op']} {g['target']}) {state}"
                     f"  [{g['detail']}]")
    return "\n".join(lines)


def text(results: Results) -> str:
    m, s = results.machine, results.settings
    head = (f"CartPole, {s['envs']} environments x {s['steps']} steps, float32, pool of "
            f"{s['pool_rows'] or s['steps']} reset rows, backend {s['backend']}\n"
            f"machine: {m['cpu']}, {m['cores']} cores ({m['host']}); fusionjit "
            f"{m['versions']['fusionjit']}, JAX {m['versions']['jax'] or '-'}; medians of "
            f"{s['repeats']} repeats")
    notes = ("x Fig.2: throughput over fusionjit on `baseline` (the paper's Fig. 2 code) "
             "with XLA's rules and threefry as a custom call (the paper's XLA).\n"
             "x Fig.5: over `pool` with XLA's rules, the paper's 'concat (baseline)' bar.")
    parts = [head, "", table(results.rows), "", notes]
    if results.skipped:
        parts += ["", "skipped peers:"] + [f"  {k}: {v}" for k, v in results.skipped.items()]
    if results.errors:
        parts += ["", "FAILED measurements:"] + [f"  {e['measurement']}: {e['error']}"
                                                 for e in results.errors]
    parts += ["", "goals (this run, this machine):", goals_text(results.goals),
              "", f"wall time {results.wall_s:.0f} s"]
    return "\n".join(parts)


def write(results: Results, out_dir: str) -> list:
    """Writes results.json, results.csv, fig5.png and crossover.png; returns the paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    data = {"settings": results.settings, "machine": results.machine,
            "rows": [asdict(r) for r in results.rows], "sweep": results.sweep,
            "skipped": results.skipped, "errors": results.errors, "goals": results.goals,
            "wall_s": results.wall_s}
    path = os.path.join(out_dir, "results.json")
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    paths.append(path)
    path = os.path.join(out_dir, "results.csv")
    m = results.machine
    versions = " ".join(f"{k}={v}" for k, v in m["versions"].items() if v)
    with open(path, "w", newline="") as f:
        rows = [asdict(r) for r in results.rows]
        fields = list(rows[0]) + ["machine", "cpu", "versions"] if rows else []
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, "machine": m["host"], "cpu": f"{m['cpu']}, {m['cores']} cores",
                             "versions": versions})
    paths.append(path)
    paths.append(fig5(results, os.path.join(out_dir, "fig5.png")))
    if results.sweep:
        paths.append(crossover(results, os.path.join(out_dir, "crossover.png")))
    return paths


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def fig5(results: Results, path: str) -> str:
    """The paper's Fig. 5: normalised throughput of the implementations, fusionjit's
    profiles and the peers side by side, the paper's bars as markers."""
    plt = _pyplot()
    rows = [r for r in results.rows if r.x_fig5 is not None]
    variants = [v for v in ("baseline", "pool", "no_concat", "unroll", "vmapped", "policy")
                if any(r.variant == v for r in rows)]
    series = [("fusionjit", "xla", "custom_call", "xla rules (the paper's XLA)", "#9e9e9e"),
              ("fusionjit", "xla+concat", "custom_call", "xla+concat (patched XLA)", "#bdbdbd"),
              ("fusionjit", "fusionjit", "fused", "fusionjit (default)", "#1f77b4"),
              ("jax", "-", None, "JAX", "#ff7f0e")]
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / len(series)
    for i, (impl, profile, lowering, label, color) in enumerate(series):
        xs, ys = [], []
        for j, v in enumerate(variants):
            r = next((r for r in rows if r.impl == impl and r.variant == v and r.profile ==
                      profile and r.lowering in (lowering, "-", "hlo")), None)
            if r is not None:
                xs.append(j + (i - (len(series) - 1) / 2) * width)
                ys.append(r.x_fig5)
        ax.bar(xs, ys, width, label=label, color=color)
    peers = [r for r in rows if r.impl not in ("fusionjit", "jax")]
    base = len(variants) + 0.5
    for k, r in enumerate(peers):
        ax.bar(base + k, r.x_fig5, 0.6, color="#2ca02c")
        if (r.impl, "-") in PAPER_FIG5:
            ax.plot(base + k, PAPER_FIG5[(r.impl, "-")], "k_", markersize=14, mew=2)
    ax.set_xticks(list(range(len(variants))) + [base + k for k in range(len(peers))])
    ax.set_xticklabels(variants + [f"{r.impl}\n{r.variant}" for r in peers], fontsize=8,
                       rotation=30, ha="right")
    for (variant, profile), value in PAPER_FIG5.items():
        if variant in variants:
            offset = {"xla": 0, "xla+concat": 1}.get(profile, 0)
            x = variants.index(variant) + (offset - (len(series) - 1) / 2) * width
            ax.plot(x, value, "k_", markersize=14, mew=2)
    ax.plot([], [], "k_", markersize=14, mew=2, label="the paper (RTX 2080 Ti)")
    ax.set_yscale("log")
    ax.set_ylabel("throughput / `pool` under xla rules")
    m, s = results.machine, results.settings
    ax.set_title(f"CartPole {s['envs']} envs x {s['steps']} steps on {m['cpu']} "
                 f"({m['cores']} cores), {s['backend']}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def crossover(results: Results, path: str) -> str:
    """Env-steps per second over the number of environments, one line per implementation
    and device."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lines = {}
    for p in results.sweep:
        label = f"{p['impl']} {p['variant']} ({p['backend']})"
        lines.setdefault(label, []).append((p["envs"], p["env_steps_per_s"]))
    for label, points in lines.items():
        points.sort()
        style = "--" if "gpu" in label else "-"
        ax.plot([p[0] for p in points], [p[1] for p in points], style, marker="o",
                markersize=3, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("environments")
    ax.set_ylabel("env-steps per second")
    m = results.machine
    ax.set_title(f"CartPole throughput over environments, {m['cpu']} ({m['cores']} cores)",
                 fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
