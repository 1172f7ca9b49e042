#!/usr/bin/env python3
"""plot_bench.py - figures from tips-bench JSON results.

    scripts/plot_bench.py results.json          # writes results-plots/*.png beside it

(scripts/install-deps.sh sets up the .venv with matplotlib; the script re-runs itself
with that venv's Python when the Python that started it lacks matplotlib.)

It reads the two documents tips-bench writes with --json:

  - a compare document (`tips-bench compare`, "kind": "tips-bench-compare"):
      throughput.png   run-phase throughput, one panel per workload, a horizontal bar
                       per index and thread count (colored by the count, each index
                       beside its twins; median, error bar min-max over the
                       runs), the ratio to the baseline beside each compared bar, capped
                       runs hatched, cells not applicable (E on a hash index) marked
                       n/a; --log for a log x axis
      ratios.png       a heatmap of the ratios to the baselines: a row per compared
                       index, a column per workload and thread count
      load.png         load-phase throughput per index and thread count, pooled over
                       all workloads
      timeline.png     throughput over time, one panel per workload, a line per index
      latency_cdf.png  run-phase latency CDF, one panel per workload, a line per index
    (the last two use the first completed run of each index and workload at the
    largest thread count). Every figure is at most 2000 pixels wide;
  - one or more single-run documents (`tips-bench --index NAME`): timeline.png and
    latency_cdf.png, a line per run.

Failed or empty results are skipped with a note on stderr. Exit codes: 0 figures
written, 1 nothing to plot or matplotlib missing, 2 bad arguments or input (a missing
file, invalid JSON, a document of neither shape).
"""
import argparse
import json
import math
import os
import sys
from pathlib import Path

VENV = Path(__file__).resolve().parent.parent / ".venv"

try:
    import matplotlib
except ImportError:
    venv_python = VENV / "bin" / "python"
    if venv_python.exists() and Path(sys.prefix).resolve() != VENV.resolve():
        os.execv(venv_python, [str(venv_python), *sys.argv])
    sys.stderr.write("plot_bench: matplotlib is missing; run scripts/install-deps.sh "
                     "and use .venv/bin/python\n")
    sys.exit(1)
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (the backend must be chosen first)
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import (EngFormatter, FuncFormatter, MaxNLocator,  # noqa: E402
                               NullFormatter)
from matplotlib.transforms import blended_transform_factory  # noqa: E402

COMPARE_KIND = "tips-bench-compare"
DPI = 150
MAX_WIDTH_IN = 13.2  # 1980 pixels at DPI: a figure fits a screen
# Short names of the operations in a mix, for the workload labels ("R95 I5").
OP_LETTERS = (("read", "R"), ("update", "U"), ("insert", "I"), ("remove", "D"),
              ("scan", "S"))


class InputError(Exception):
    """A file that cannot be plotted: reported, then exit 2."""


def note(msg):
    print(f"plot_bench: note: {msg}", file=sys.stderr)


# ---- reading ------------------------------------------------------------------------

def load_document(path):
    """The JSON document at @path, and its shape: "compare" or "single"."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file")
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not valid JSON: {e}")
    if isinstance(doc, dict):
        if doc.get("kind") == COMPARE_KIND and isinstance(doc.get("results"), list):
            return doc, "compare"
        if isinstance(doc.get("index"), str) and isinstance(doc.get("run"), dict):
            return doc, "single"
    raise InputError(f"{path}: not a tips-bench result (expected a single run with "
                     f'"index" and "run", or a compare document with "kind": '
                     f'"{COMPARE_KIND}")')


def human_count(n):
    """A count with tips-bench's 1024-based suffixes, as given to --records: 102400 ->
    "100K"."""
    if not isinstance(n, (int, float)):
        return "?"
    for div, suffix in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if n >= div:
            return f"{n / div:.4g}{suffix}"
    return f"{n:g}"


def mix_label(config):
    """The operation mix of a run's config as "R50 U50", or "" if unknown."""
    ratios = (config or {}).get("ratios") or {}
    parts = [f"{letter}{round(ratios[op] * 100):g}" for op, letter in OP_LETTERS
             if isinstance(ratios.get(op), (int, float)) and ratios[op] > 0]
    return " ".join(parts)


def workload_label(workload, config):
    mix = mix_label(config)
    name = workload.upper() if len(workload) == 1 else workload
    return f"{name} ({mix})" if mix else name


def timeline_steps(phase):
    """A phase's timeline as a step line: (seconds, ops/s) at the start of each interval,
    and a last point at the end of the last one, which repeats its rate.

    The last interval is partial: its length comes from the phase's "seconds"; when it is
    shorter than half an interval its rate is mostly noise and it is left out (unless it
    is the only one)."""
    counts = phase.get("timeline") or []
    step = (phase.get("timeline_ms") or 0) / 1000.0
    total = phase.get("seconds")
    if not counts or step <= 0:
        return [], []
    times, rates = [], []
    end = 0.0
    for k, ops in enumerate(counts):
        start, length = k * step, step
        if k == len(counts) - 1 and isinstance(total, (int, float)):
            length = min(step, total - start)
            if length <= 0 or (length < step / 2 and k > 0):
                break
        times.append(start)
        rates.append(ops / length)
        end = start + length
    if times:
        times.append(end)
        rates.append(rates[-1])
    return times, rates


def cdf_points(phase):
    """(latency ns, cumulative fraction) lists of a phase's latency CDF."""
    cdf = [p for p in phase.get("latency_cdf") or [] if len(p) == 2 and p[0] > 0]
    return [p[0] for p in cdf], [p[1] for p in cdf]


def config_line(config, compare):
    c = config or {}
    counts = c.get("thread_counts") or [c.get("threads", "?")]
    parts = [f"{human_count(c.get('records'))} records",
             f"{c['seconds']:g} s runs" if c.get("seconds") else
             f"{human_count(c.get('ops'))} ops",
             f"{','.join(str(t) for t in counts)} threads", f"{c.get('dist', '?')} keys"]
    if compare:
        parts.append(f"median of {c.get('repeat', '?')} runs")
    if c.get("max_seconds") and not c.get("seconds"):
        parts.append(f"run phase capped at {c['max_seconds']:g} s")
    return ", ".join(parts)


# ---- drawing helpers ----------------------------------------------------------------

def colors_for(names):
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {name: cycle[i % len(cycle)] for i, name in enumerate(names)}


def panel_grid(n, title):
    """A figure with @n panels, three to a row; returns (figure, axes list)."""
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(MAX_WIDTH_IN / 3 * ncols, 3.4 * nrows + 0.9),
                             squeeze=False, layout="constrained")
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    fig.suptitle(title)
    return fig, flat[:n]


def figure_legend(fig, handles, labels, title=None):
    """One legend for all panels, below them, where it covers no data."""
    if handles:
        fig.legend(handles, labels, loc="outside lower center", fontsize="small",
                   ncol=min(len(labels), 5), title=title)


def save(fig, out_dir, name):
    path = out_dir / name
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def label_log_axis(ax, axis, fmt):
    """Tick labels of the log-scaled @axis of @ax by @fmt(value, pos). The minor ticks
    (2, 3, ... 9 times a power of ten) are labelled too when fewer than two powers of ten
    fall on the axis, which would leave it with one label or none."""
    lo, hi = ax.get_xlim() if axis is ax.xaxis else ax.get_ylim()
    decades = math.floor(math.log10(hi)) - math.ceil(math.log10(lo)) + 1 if lo > 0 else 2
    axis.set_major_formatter(FuncFormatter(fmt))
    axis.set_minor_formatter(FuncFormatter(fmt) if decades < 2 else NullFormatter())


def zero_based(ax, headroom):
    """A linear y axis from 0 to @headroom times the highest value drawn."""
    top = ax.dataLim.y1
    ax.set_ylim(0, top * headroom if math.isfinite(top) and top > 0 else 1)


def draw_timeline(ax, phase, label, color):
    times, rates = timeline_steps(phase)
    if not times:
        return False
    ax.plot(times, rates, label=label, color=color, drawstyle="steps-post", linewidth=1.2)
    return True


def style_timeline(ax, log):
    ax.set_xlabel("time since run start (s)")
    ax.set_ylabel("throughput (ops/s" + (", log scale)" if log else ")"))
    ax.xaxis.set_major_locator(MaxNLocator(6))
    if log:
        ax.set_yscale("log")
        ax.margins(y=0.1)
        label_log_axis(ax, ax.yaxis, EngFormatter())
    else:
        zero_based(ax, 1.1)
        ax.yaxis.set_major_formatter(EngFormatter())
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)


def draw_cdf(ax, phase, label, color):
    ns, frac = cdf_points(phase)
    if not ns:
        return False
    ax.plot(ns, frac, label=label, color=color, drawstyle="steps-post", linewidth=1.2)
    return True


def human_ns(ns, _pos=None):
    """A latency tick label: 250 -> "250ns", 1500 -> "1.5µs", 2e7 -> "20ms"."""
    for div, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "\u00b5s")):
        if ns >= div:
            return f"{ns / div:g}{unit}"
    return f"{ns:g}ns"


def style_cdf(ax):
    ax.set_xscale("log")
    ax.set_xlabel("latency (log scale)")
    ax.set_ylabel("fraction of operations")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3, which="both")
    label_log_axis(ax, ax.xaxis, human_ns)


# ---- compare documents --------------------------------------------------------------

def family_key(name):
    """Sort key that puts an index next to its twins: tips-X, pmdk-X, dram-X, then the
    indexes without a family (null, listdb)."""
    prefix, _, rest = name.partition("-")
    rank = {"tips": 0, "pmdk": 1, "dram": 2}
    if prefix in rank and rest:
        return (0, rest, rank[prefix])
    return (1, name, 0)


class Compare:
    """A compare document indexed by (workload, index, threads), with the unusable
    cells noted: failed ones (no completed run) and those not applicable (workload E on a
    hash index: listed, never run)."""

    def __init__(self, doc):
        self.config = doc.get("config") or {}
        self.cells, self.not_applicable = {}, set()
        self.workloads, self.indexes, self.threads = [], [], []
        for r in doc["results"]:
            if not isinstance(r, dict) or not r.get("index") or not r.get("workload"):
                note("skipping a malformed result entry")
                continue
            idx, wl = r["index"], r["workload"]
            t = r.get("threads", self.config.get("threads"))
            for lst, v in ((self.workloads, wl), (self.indexes, idx), (self.threads, t)):
                if v not in lst:
                    lst.append(v)
            if r.get("applicable") is False:
                self.not_applicable.add((wl, idx, t))
                continue
            stats = r.get("run_ops_per_sec") or {}
            if not r.get("completed") or not stats.get("runs") or not r.get("runs") or \
                    not isinstance(stats.get("median"), (int, float)):
                note(f"skipping {idx} on workload {wl} with {t} threads: no completed run "
                     f"({r.get('failed', '?')} failed)")
                continue
            self.cells[(wl, idx, t)] = r
        self.colors = colors_for(self.indexes)
        self.threads.sort(key=lambda t: t if isinstance(t, int) else 0)
        cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        self.thread_colors = {t: cycle[k % len(cycle)] for k, t in enumerate(self.threads)}
        self.family_order = sorted(self.indexes, key=family_key)

    def first_run(self, wl, idx, t=None):
        r = self.cells.get((wl, idx, max(self.threads) if t is None else t))
        return r["runs"][0] if r else None

    def label(self, wl):
        for idx in self.indexes:
            for t in self.threads:
                run = self.first_run(wl, idx, t)
                if run:
                    return workload_label(wl, run.get("config"))
        return workload_label(wl, None)


def annotate_bar(ax, x, top, text, rotate):
    ax.annotate(text, (x, top), xytext=(0, 2), textcoords="offset points", ha="center",
                va="bottom", fontsize=7, rotation=90 if rotate else 0)


def spread(values, median):
    """Error bar lengths (below, above) of @median for the min-max of @values."""
    return [median - min(values)], [max(values) - median]


def style_bars(ax, log):
    if log:
        ax.set_yscale("log")
        label_log_axis(ax, ax.yaxis, lambda v, _pos: f"{v:g}")
    else:
        zero_based(ax, 1.15)
    ax.grid(axis="y", alpha=0.3, which="both")
    ax.set_axisbelow(True)


def thread_alpha(cmp, t):
    """Fill opacity of the load bars of thread count @t: the first count lightest."""
    k = cmp.threads.index(t)
    return 0.45 + 0.55 * k / max(1, len(cmp.threads) - 1)


def plot_throughput(cmp, out_dir, log):
    """One panel per workload: a horizontal bar per index and thread count, colored by
    the thread count, each index next to its twins."""
    nt = len(cmp.threads)
    order = cmp.family_order
    fig, axes = panel_grid(len(cmp.workloads), "Run-phase throughput (ratio to the baseline "
                           "beside each bar)\n" + config_line(cmp.config, True))
    fig.set_size_inches(fig.get_size_inches()[0],
                        max(3.4, 0.085 * nt * len(order) + 1.0) *
                        math.ceil(len(cmp.workloads) / 3) + 1.0)
    height = 0.8 / nt
    any_capped = False
    for ax, wl in zip(axes, cmp.workloads):
        base = blended_transform_factory(ax.transAxes, ax.transData)
        for i, idx in enumerate(order):
            for k, t in enumerate(cmp.threads):
                y = i - 0.4 + height * (k + 0.5)
                if (wl, idx, t) in cmp.not_applicable:
                    ax.text(0.01, y, "n/a", transform=base, va="center", fontsize=6,
                            color="gray")
                    continue
                r = cmp.cells.get((wl, idx, t))
                if r is None:
                    ax.text(0.01, y, "failed", transform=base, va="center", fontsize=6,
                            color="tab:red")
                    continue
                runs = [v / 1e6 for v in r["run_ops_per_sec"]["runs"]]
                median = r["run_ops_per_sec"]["median"] / 1e6
                capped = bool(r.get("capped"))
                any_capped |= capped
                ax.barh(y, median, height, xerr=spread(runs, median), capsize=1.5,
                        color=cmp.thread_colors[t],
                        edgecolor="black", linewidth=0.4, hatch="///" if capped else None,
                        error_kw={"elinewidth": 0.6})
                ratio = r.get("ratio")
                if r.get("baseline") and isinstance(ratio, (int, float)) and ratio > 0:
                    ax.annotate(f"{ratio:.2f}x", (max(runs), y), xytext=(2, 0),
                                textcoords="offset points", va="center", fontsize=5.5)
        ax.set_yticks(range(len(order)), order, fontsize=6.5)
        ax.invert_yaxis()
        ax.set_title(f"workload {cmp.label(wl)}", fontsize="medium")
        ax.set_xlabel("Mops/s" + (" (log scale)" if log else ""), fontsize="small")
        if log:
            ax.set_xscale("log")
            label_log_axis(ax, ax.xaxis, lambda v, _pos: f"{v:g}")
        else:
            lo, hi = ax.get_xlim()
            ax.set_xlim(0, hi * 1.15)
        ax.grid(axis="x", alpha=0.3, which="both")
        ax.set_axisbelow(True)
    handles = [Patch(facecolor=cmp.thread_colors[t], edgecolor="black") for t in cmp.threads]
    labels = [f"{t} thread{'s' if t != 1 else ''}" for t in cmp.threads]
    if any_capped:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="///"))
        labels.append("capped: stopped at a time or insert bound")
    if cmp.not_applicable:
        handles.append(Patch(facecolor="white", edgecolor="white"))
        labels.append("n/a: a hash index has no key order to scan (E not run)")
    figure_legend(fig, handles, labels)
    return save(fig, out_dir, "throughput.png")


def plot_ratios(cmp, out_dir):
    """A heatmap of the ratios to the baselines: a row per compared index, a column
    per workload and thread count."""
    rows = [idx for idx in cmp.family_order
            if any(r.get("baseline") for (w, i, t), r in cmp.cells.items() if i == idx)]
    cols = [(wl, t) for wl in cmp.workloads for t in cmp.threads]
    if not rows:
        note("ratios.png: no index has a baseline")
        return None
    grid = [[math.nan] * len(cols) for _ in rows]
    for y, idx in enumerate(rows):
        for x, (wl, t) in enumerate(cols):
            r = cmp.cells.get((wl, idx, t))
            if r and isinstance(r.get("ratio"), (int, float)) and r["ratio"] > 0:
                grid[y][x] = r["ratio"]
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH_IN, 3.0 + 0.7 * len(cols)),
                                    max(2.8, 1.6 + 0.35 * len(rows))), layout="constrained")
    cmap = matplotlib.colormaps["RdYlGn"].copy()
    cmap.set_bad("lightgray")
    im = ax.imshow(grid, cmap=cmap, vmin=0, vmax=1.5, aspect="auto")
    for y, idx in enumerate(rows):
        for x, (wl, t) in enumerate(cols):
            v = grid[y][x]
            text = "n/a" if (wl, idx, t) in cmp.not_applicable else \
                "-" if math.isnan(v) else f"{v:.2f}"
            ax.text(x, y, text, ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(cols)), [f"{wl.upper() if len(wl) == 1 else wl}\n{t} thr"
                                     for wl, t in cols], fontsize=7)
    baselines = {r.get("baseline") for r in cmp.cells.values() if r.get("baseline")}
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    fig.colorbar(im, ax=ax, label="run-phase throughput ratio", shrink=0.8)
    fig.suptitle("Ratio to the baseline (" + ", ".join(sorted(baselines)) + ")\n" +
                 config_line(cmp.config, True), fontsize="small")
    return save(fig, out_dir, "ratios.png")


def plot_load(cmp, out_dir, log):
    pooled, baseline = {}, {}
    for (wl, idx, t), r in cmp.cells.items():
        pooled.setdefault((idx, t), []).extend(
            (r.get("load_ops_per_sec") or {}).get("runs") or [])
        baseline[idx] = r.get("baseline")
    keys = [(idx, t) for idx in cmp.indexes for t in cmp.threads if pooled.get((idx, t))]
    if not keys:
        note("no load throughput to plot")
        return None
    medians = {}
    for key in keys:
        runs = sorted(v / 1e6 for v in pooled[key])
        mid = len(runs) // 2
        medians[key] = runs[mid] if len(runs) % 2 else (runs[mid - 1] + runs[mid]) / 2
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH_IN, max(8.0, 3.0 + 0.35 * len(keys))), 5.0),
                           layout="constrained")
    for x, (idx, t) in enumerate(keys):
        runs = [v / 1e6 for v in pooled[(idx, t)]]
        ax.bar(x, medians[(idx, t)], 0.7, yerr=spread(runs, medians[(idx, t)]), capsize=2,
               color=cmp.colors[idx], alpha=thread_alpha(cmp, t), edgecolor="black",
               linewidth=0.5)
        base = baseline.get(idx)
        if (base, t) in medians and medians[(base, t)] > 0:
            annotate_bar(ax, x, max(runs), f"{medians[(idx, t)] / medians[(base, t)]:.2f}x",
                         rotate=True)
    ax.set_xticks(range(len(keys)), [f"{idx} {t}t" for idx, t in keys], rotation=60,
                  ha="right", fontsize=7)
    ax.set_xlabel("index, thread count (ratio: to the baseline at the same count)")
    ax.set_ylabel("load throughput (Mops/s" + (", log scale)" if log else ")"))
    fig.suptitle(f"Load-phase throughput: {human_count(cmp.config.get('records'))} "
                 f"inserts, median and min-max of the runs of every workload\n"
                 + config_line(cmp.config, False), fontsize="medium")
    style_bars(ax, log)
    return save(fig, out_dir, "load.png")


def plot_compare_panels(cmp, out_dir, name, title, draw, style):
    """One panel per workload, a line per index drawn by @draw from the first run."""
    fig, axes = panel_grid(len(cmp.workloads), title + "\n" + config_line(cmp.config, True))
    drawn = {}
    for ax, wl in zip(axes, cmp.workloads):
        lines = 0
        for idx in cmp.indexes:
            run = cmp.first_run(wl, idx)
            if run is None:
                continue  # noted when the document was read
            if draw(ax, run.get("run") or {}, idx, cmp.colors[idx]):
                drawn[idx] = True
                lines += 1
            else:
                note(f"{name}: {idx} on workload {wl} has no data")
        ax.set_title(f"workload {cmp.label(wl)}", fontsize="medium")
        style(ax)
        if not lines:
            ax.axis("off")
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center")
    if not drawn:
        plt.close(fig)
        note(f"{name}: nothing to plot")
        return None
    handles = [plt.Line2D([], [], color=cmp.colors[idx]) for idx in cmp.indexes if idx in drawn]
    figure_legend(fig, handles, [idx for idx in cmp.indexes if idx in drawn], "index")
    return save(fig, out_dir, name)


def plot_compare(doc, out_dir, log):
    cmp = Compare(doc)
    if not cmp.cells:
        note("no completed result in the document")
        return []
    return [
        plot_throughput(cmp, out_dir, log),
        plot_ratios(cmp, out_dir),
        plot_load(cmp, out_dir, log),
        plot_compare_panels(cmp, out_dir, "timeline.png",
                            "Run-phase throughput over time (first completed run of each, "
                            f"{max(cmp.threads)} threads)",
                            draw_timeline,
                            lambda ax: style_timeline(ax, log)),
        plot_compare_panels(cmp, out_dir, "latency_cdf.png",
                            "Run-phase latency CDF (first completed run of each, "
                            f"{max(cmp.threads)} threads)",
                            draw_cdf, style_cdf),
    ]


# ---- single-run documents -----------------------------------------------------------

def run_labels(docs):
    """A legend label per run: "index, workload", made unique with the file name."""
    labels = []
    for _, doc in docs:
        config = doc.get("config") or {}
        labels.append(f"{doc['index']}, {workload_label(str(config.get('workload', '?')), config)}")
    return [f"{lbl} [{Path(p).name}]" if labels.count(lbl) > 1 else lbl
            for lbl, (p, _) in zip(labels, docs)]


def plot_singles(docs, out_dir, log):
    labels = run_labels(docs)
    colors = colors_for(labels)
    subtitle = config_line(docs[0][1].get("config"), False) if len(docs) == 1 else \
        f"{len(docs)} runs"
    written = []
    for name, title, draw, style in (
            ("timeline.png", "Run-phase throughput over time",
             lambda ax, ph, lbl: draw_timeline(ax, ph, lbl, colors[lbl]),
             lambda ax: style_timeline(ax, log)),
            ("latency_cdf.png", "Run-phase latency CDF",
             lambda ax, ph, lbl: draw_cdf(ax, ph, lbl, colors[lbl]), style_cdf)):
        fig, ax = plt.subplots(figsize=(7, 4.6), layout="constrained")
        drawn = 0
        for lbl, (path, doc) in zip(labels, docs):
            if draw(ax, doc.get("run") or {}, lbl):
                drawn += 1
            else:
                note(f"{name}: {path} has no run-phase data")
        if not drawn:
            plt.close(fig)
            note(f"{name}: nothing to plot")
            continue
        style(ax)
        fig.suptitle(f"{title}\n{subtitle}", fontsize="medium")
        figure_legend(fig, *ax.get_legend_handles_labels())
        written.append(save(fig, out_dir, name))
    return written


# ---- main ---------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Plot tips-bench JSON results (a compare document, or one or more "
                    "single-run documents) as PNG figures.",
        epilog="exit codes: 0 figures written, 1 nothing to plot, 2 bad arguments or input")
    p.add_argument("json", nargs="+", metavar="RESULT.json",
                   help="tips-bench --json output; several files only for single runs")
    p.add_argument("--out", metavar="DIR", type=Path,
                   help="output directory (default: beside the first file, named after "
                        "it: results.json -> results-plots/)")
    p.add_argument("--log", action="store_true",
                   help="log throughput axes (indexes differ by orders of magnitude)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        docs = [(path, *load_document(path)) for path in args.json]
    except InputError as e:
        print(f"plot_bench: {e}", file=sys.stderr)
        return 2
    if any(kind == "compare" for _, _, kind in docs) and len(docs) > 1:
        print("plot_bench: a compare document must be plotted on its own", file=sys.stderr)
        return 2
    first = Path(args.json[0])
    out_dir = args.out or first.with_name(first.stem + "-plots")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"plot_bench: cannot create {out_dir}: {e.strerror}", file=sys.stderr)
        return 2
    if docs[0][2] == "compare":
        written = plot_compare(docs[0][1], out_dir, args.log)
    else:
        written = plot_singles([(path, doc) for path, doc, _ in docs], out_dir, args.log)
    written = [p for p in written if p]
    for path in written:
        print(path)
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
