"""matplotlib PNGs of the records: latency and bandwidth against message size, one line per
mode, log axes; I/O rates per mode as bars with the range over repeats as error bars; the
headline's time ratios per mode and benchmark on a log axis around 1. A mode has one colour
in every plot."""

import math
import re
import statistics
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

from climstack.bench.report import stats  # noqa: E402
from climstack.bench.run import catalogue  # noqa: E402
from climstack.bench.results.records import Record, batch_text  # noqa: E402

SIZED = ("latency", "bandwidth")
#: a colour per catalogue row and then some (tab10 alone ran out at the eleventh mode)
PALETTE = plt.get_cmap("tab10").colors + plt.get_cmap("Dark2").colors


def colour(mode: str, others: list[str] = ()) -> tuple:
    """The mode's colour: the known modes first, then the others in their order."""
    order = catalogue.names() + [m for m in others if m not in catalogue.names()]
    return PALETTE[order.index(mode) % len(PALETTE)] if mode in order else PALETTE[-1]


def _medians(records: list[Record]) -> dict[str, tuple[list, list, list, list]]:
    """mode -> (x, median, low, high) over repeats."""
    by = defaultdict(lambda: defaultdict(list))
    for r in records:
        by[r.mode][r.bytes].append(r.value)
    out = {}
    for mode, sizes in by.items():
        xs = sorted(sizes)
        out[mode] = (
            xs,
            [statistics.median(sizes[x]) for x in xs],
            [min(sizes[x]) for x in xs],
            [max(sizes[x]) for x in xs],
        )
    return out


def _save(figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def sized(records: list[Record], title: str, path: Path) -> Path:
    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    series_of = _medians(records)
    for mode, series in ((m, series_of[m]) for m in catalogue.ordered({r.mode for r in records})):
        # a log axis has no 0 B: those sizes stay in the tables only
        points = [point for point in zip(*series) if point[0] > 0]
        if not points:
            continue
        xs, median, low, high = zip(*points)
        tint = colour(mode, catalogue.ordered({r.mode for r in records}))
        axes.plot(xs, median, marker="o", markersize=3, label=mode, color=tint)
        axes.fill_between(xs, low, high, alpha=0.2, color=tint)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("message size (bytes)")
    axes.set_ylabel(f"{records[0].metric} ({records[0].unit})")
    axes.set_title(title)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    return _save(figure, path)


def rates(records: list[Record], title: str, path: Path) -> Path:
    operations = sorted({r.operation for r in records})
    modes = catalogue.ordered({r.mode for r in records})
    figure, axes = plt.subplots(figsize=(7.6, 4.2))
    width = 0.8 / len(modes)
    for index, mode in enumerate(modes):
        values = [
            [r.value for r in records if r.mode == mode and r.operation == o] for o in operations
        ]
        medians = [statistics.median(v) if v else 0 for v in values]
        errors = [
            [m - min(v) if v else 0 for m, v in zip(medians, values)],
            [max(v) - m if v else 0 for m, v in zip(medians, values)],
        ]
        xs = [i + index * width for i in range(len(operations))]
        tint = colour(mode, modes)
        axes.bar(xs, medians, width, yerr=errors, capsize=3, label=mode, color=tint)
    axes.set_xticks([i + width * (len(modes) - 1) / 2 for i in range(len(operations))])
    axes.set_xticklabels(operations)
    axes.set_ylabel(f"rate ({records[0].unit}), median and range")
    axes.set_title(title)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")  # off the bars
    return _save(figure, path)


def summary(rows, path: Path) -> Path:
    """The headline (climstack.bench.report.headline rows): per benchmark and operation group, each
    mode's time ratio to native with its confidence interval (stats), log axis around 1,
    the band of `within` shaded."""
    modes = list(rows[0].cells)
    figure, axes = plt.subplots(figsize=(8.4, 1.4 + 0.42 * len(rows)))
    points, found = defaultdict(list), []  # mode -> (y, ratio, low, high)
    for index, row in enumerate(rows):
        present = [m for m in modes if row.cells[m].ratio is not None]
        step = min(0.2, 0.8 / max(len(present), 1))  # a row's modes stay within the row
        for place, mode in enumerate(present):
            c = row.cells[mode]
            low, high = (c.low, c.high) if c.low is not None else (c.ratio, c.ratio)
            points[mode].append(
                (index + (place - (len(present) - 1) / 2) * step, c.ratio, low, high)
            )
            found += [c.ratio, low, high]
    clipped = any(abs(math.log10(v)) > CLIP for v in found)
    for mode in (m for m in modes if points[m]):
        ys, ratio, low, high = zip(*points[mode])
        low, high = [[min(max(v, 10**-CLIP), 10**CLIP) for v in side] for side in (low, high)]
        tint = colour(mode, modes)
        axes.hlines(ys, low, high, color=tint, linewidth=1.5)  # the confidence interval
        axes.plot(low + high, ys + ys, "|", color=tint, markersize=8)
        axes.plot(ratio, ys, "o", color=tint, markersize=6, label=mode)
    for index, row in enumerate(rows):  # a row without a ratio says why
        if all(c.ratio is None for c in row.cells.values()):
            why = sorted({c.verdict for c in row.cells.values()} - {"-"})
            axes.annotate(
                ", ".join(why) or "-", (1, index), xytext=(6, 0), textcoords="offset points",
                va="center", fontsize="small", color="dimgrey",
            )  # fmt: skip
    axes.axvline(1.0, color="black", linewidth=1)
    band = f"within {stats.WITHIN:.0%}"
    axes.axvspan(1 - stats.WITHIN, 1 + stats.WITHIN, color="green", alpha=0.15, label=band)
    reach = min(max([abs(math.log10(v)) for v in found] + [math.log10(1.1)]) * 1.1, CLIP)
    axes.set_xscale("log")
    axes.set_xlim(10**-reach, 10**reach)
    ticks = _ticks(reach)
    axes.set_xticks(ticks, [f"{t:.2g}" for t in ticks])
    axes.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    several = len({r.group.batch for r in rows}) > 1
    labels = [
        (f"{batch_text(r.group.batch)}\n" if several else "")
        + f"{r.group.benchmark}: {r.group.name}"
        for r in rows
    ]
    axes.set_yticks(range(len(rows)), labels)
    axes.set_ylim(len(rows) - 0.5, -0.5)  # the table's order, top down
    axes.set_xlabel(
        f"time ratio to native (above 1: slower); bars: {stats.CONFIDENCE:.0%} confidence "
        "interval" + (f" (cut at {10**CLIP:g}x)" if clipped else "")
    )
    axes.set_title("Each mode against native")
    axes.grid(True, axis="x", alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    return _save(figure, path)


CLIP = 1.0  # log10 of the widest ratio the plot shows: wider intervals are cut there
CANDIDATE_TICKS = (1.01, 1.02, 1.05, 1.1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000)


def _ticks(reach: float) -> list[float]:
    """Ticks from 1 outwards on both sides of a log axis reaching 10**±reach, spaced at
    least a ninth of its width apart."""
    kept = [1.0]
    for tick in CANDIDATE_TICKS:
        if math.log10(tick) > reach:
            break
        if math.log10(tick) - math.log10(kept[-1]) >= 2 * reach / 9:
            kept.append(tick)
    return sorted({round(1 / t, 3) for t in kept[1:]} | set(kept))


def draw(records: list[Record], out: Path) -> list[tuple[str, Path]]:
    """One plot per batch, benchmark, operation and metric with sizes; one bar chart per
    batch and I/O benchmark: (benchmark, PNG) each. Batches are never drawn together."""
    written = []
    groups = defaultdict(list)
    for r in records:
        groups[(r.batch, r.benchmark, r.operation if r.metric in SIZED else "", r.metric)].append(
            r
        )
    several = len({r.batch for r in records}) > 1
    for (batch, benchmark, operation, metric), mine in sorted(groups.items()):
        where = ("-" + "-".join(batch)) if several else ""
        at = f" ({batch_text(batch)})" if several else ""
        if metric in SIZED and len({r.bytes for r in mine}) > 1:
            name = f"{benchmark}-{operation}-{metric}{where}"
            title = f"{benchmark} {operation}, {mine[0].ranks} ranks{at}"
            written.append((benchmark, sized(mine, title, out / "plots" / f"{_file(name)}.png")))
        elif metric == "rate":
            title = f"{benchmark}: I/O rate per mode, {mine[0].ranks} ranks{at}"
            path = out / "plots" / f"{_file(benchmark + '-rate' + where)}.png"
            written.append((benchmark, rates(mine, title, path)))
    return written


def _file(name: str) -> str:
    return re.sub(r"[^\w.+-]+", "_", name)
