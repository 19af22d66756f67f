"""The report of `bench scale` (scale.md, scale.png) from its runs alone: per mode, each
figure's cost per added rank with its interval, the medians per rank count, and the start-up
load on a Lustre metadata server at 1,000 and 10,000 ranks (climstack.bench.scale.growth)."""

import statistics
from collections import defaultdict
from pathlib import Path

from climstack.bench.scale import growth
from climstack.bench.scale.scale_modes import MODES

PLOTTED = ("start-up", "memory (PSS)", "processes", "SIF mounts", "metadata calls",
           "on the shared file system")  # fmt: skip


def _runs(rows, kind: str | None = None) -> list[dict]:
    """The runs measured (not those that failed): osu_init's launches, or with `kind`
    ("model", "loader") MOM6's runs or its loader's."""
    kinds = ("model", "loader")
    return [row for row in rows if "failed" not in row
            and (kind in row if kind else not any(k in row for k in kinds))]  # fmt: skip


def _points(rows, key: str) -> dict[str, list[tuple[int, float]]]:
    points = defaultdict(list)
    for row in rows:
        if "failed" not in row and "ranks" in row and row.get(key) is not None:
            points[row["mode"]].append((row["ranks"], row[key]))
    return points


def lines(rows) -> dict[str, dict[str, growth.Line | None]]:
    """figure -> mode -> its fitted line."""
    fitted = {}
    for figure, (key, _) in growth.FIGURES.items():
        points = _points(rows, key)
        fitted[figure] = {mode: growth.fit(points[mode]) for mode in MODES if mode in points}
    return fitted


def _number(value: float) -> str:
    value = 0.0 if abs(value) < 1e-6 else value  # a fit's rounding error, not a figure
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def markdown(rows, record: str) -> str:
    fitted = lines(rows)
    out = [
        f"From {record}: osu_init (MPI_Init, then MPI_Finalize) launched by the host's "
        "mpiexec on one node of 2 cores, oversubscribed: only start-up and memory are "
        "measured. Each figure fitted as per launch + per rank x ranks over every run; the "
        "per-rank slope's 95 % interval in brackets.",
        "",
        "### Per added rank",
        "",
        "| figure | " + " | ".join(m for m in MODES if m in fitted["start-up"]) + " |",
        "|---|" + "---|" * len(fitted["start-up"]),
    ]
    for figure, (_, unit) in growth.FIGURES.items():
        cells = []
        for mode in (m for m in MODES if m in fitted["start-up"]):
            line = fitted[figure].get(mode)
            cells.append(
                f"{_number(line.per_rank)} [{_number(line.low)}, {_number(line.high)}]"
                if line else "-"
            )  # fmt: skip
        out.append(
            f"| {figure}{f' ({unit})' if unit else ''} per rank | " + " | ".join(cells) + " |"
        )
    out += ["", "### Medians per rank count", ""]
    out += _medians(rows)
    out += [
        "",
        "### At 1,000 and 10,000 ranks: the start-up load on one Lustre metadata server",
        "",
    ]
    out += _at_scale(fitted["on the shared file system"], _runs(rows, "loader"))
    failed = [r for r in rows if "failed" in r]
    if failed:
        out += ["", "### Failed", ""]
        out += [f"- {r['mode']} {r.get('ranks', '')} ranks: {r['failed']}" for r in failed]
    return "\n".join(out) + "\n"


def _medians(rows) -> list[str]:
    keys = (("wall_s", "start-up s"), ("pss_mib", "PSS MiB"), ("processes", "processes"),
            ("image_mounts", "SIF mounts"), ("mount_namespaces", "mount namespaces"),
            ("calls_all", "metadata calls"), ("calls_shared", "on the shared FS"))  # fmt: skip
    out = ["| mode | ranks | " + " | ".join(t for _, t in keys) + " | MOM6 to main loop s |",
           "|---|---|" + "---|" * (len(keys) + 1)]  # fmt: skip
    grouped, models = defaultdict(list), defaultdict(list)
    for row in _runs(rows):
        grouped[(row["mode"], row["ranks"])].append(row)
    for row in _runs(rows, "model"):
        models[(row["mode"], row["ranks"])].append(row["to_main_loop_s"])
    for mode in MODES:
        for ranks in sorted({r for m, r in [*grouped, *models] if m == mode}):
            runs = grouped.get((mode, ranks), [])
            cells = []
            for key, _ in keys:
                values = [r[key] for r in runs if r.get(key) is not None]
                cells.append(_number(statistics.median(values)) if values else "-")
            model = models.get((mode, ranks))
            cells.append(_number(statistics.median(model)) if model else "-")
            out.append(f"| {mode} | {ranks} | " + " | ".join(cells) + " |")
    return out


def _at_scale(shared: dict, loaders: list[dict]) -> list[str]:
    scale = growth.AT_SCALE
    out = [
        "| mode | shared-FS calls per rank | per node launch | "
        + " | ".join(f"calls at {n:,} | MDS seconds at {n:,}" for n in scale)
        + " |",
        "|---|---|---|" + "---|---|" * len(scale),
    ]
    for mode, line in shared.items():
        if not line:
            continue
        cells = []
        for ranks in scale:
            calls, seconds = growth.load_at(line, ranks)
            cells += [f"{calls:,.0f}", f"{seconds:.3g}"]
        out.append(f"| {mode} | {_number(line.per_rank)} | {_number(line.per_launch)} | "
                   + " | ".join(cells) + " |")  # fmt: skip
    for model in loaders:  # a model's loader alone: each rank's look-ups, none per launch
        line = growth.Line(0.0, model["calls_shared"], 0.0, 0.0, 1)
        cells = [f"{v:,.0f}" if i % 2 == 0 else f"{v:.3g}" for n in scale for i, v in
                 enumerate(growth.load_at(line, n))]  # fmt: skip
        out.append(
            f"| {model['mode']}, {model['loader']}'s loader alone | "
            f"{model['calls_shared']} | - | " + " | ".join(cells) + " |"
        )
    out += [
        "",
        f"Assumptions: {growth.RANKS_PER_NODE} ranks per node (ARCHER2, Gaea C5), each node's "
        "launch costing its fitted per-launch part and each rank its slope, as measured here "
        "on one node; every call answered by one metadata server at "
        f"{growth.MDS_RATE:,} calls/s, the published rate of file stat, its cheapest call "
        f"(opens cost more: the load is a floor). Source: {growth.MDS_SOURCE}. What is charged: "
        "natively the ranks' look-ups in the install tree (a centre installs there, on the "
        "shared file system); a SIF's own opens and stats (look-ups inside it are squashfuse's "
        "reads of its data); a directory image's look-ups, kept on the shared file system as "
        "on a diskless node. The host's MPI bound in (/opt/cray on a Cray EX: the node's "
        "image) is not charged.",
    ]
    return out


def plot(rows, path: Path) -> Path:
    """Each plotted figure's median against ranks, per mode, both axes logarithmic
    (matplotlib: the `bench` extra, imported here, so the tables need none)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    figure, axes = plt.subplots(2, 3, figsize=(15, 8))
    colours = {mode: f"C{i}" for i, mode in enumerate(MODES)}
    for axis, name in zip(axes.flat, PLOTTED):
        key, unit = growth.FIGURES[name]
        for mode, points in _points(rows, key).items():
            by_ranks = defaultdict(list)
            for ranks, value in points:
                by_ranks[ranks].append(value)
            xs = sorted(by_ranks)
            ys = [statistics.median(by_ranks[x]) for x in xs]
            if any(ys):  # a mode at 0 throughout (no SIF mounts) has no place on a log scale
                axis.plot(xs, ys, marker="o", label=mode, color=colours[mode])
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        axis.yaxis.set_minor_formatter(
            matplotlib.ticker.LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4))
        )
        axis.set_xlabel("ranks on one node")
        axis.set_title(name + (f" ({unit})" if unit else ""))
        axis.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    figure.suptitle("bench scale: what a launch costs as ranks grow (medians; a mode at 0 "
                    "throughout is not drawn)")  # fmt: skip
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
