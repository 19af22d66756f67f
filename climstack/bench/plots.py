"""matplotlib PNGs of the records: latency and bandwidth against message size, one line per
mode, log axes; I/O rates per mode as bars with the range over repeats as error bars."""

import statistics
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from climstack.bench.records import Record, ordered_modes  # noqa: E402

SIZED = ("latency", "bandwidth")


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
    for mode, series in ((m, series_of[m]) for m in ordered_modes(records)):
        # a log axis has no 0 B: those sizes stay in the tables only
        points = [point for point in zip(*series) if point[0] > 0]
        if not points:
            continue
        xs, median, low, high = zip(*points)
        axes.plot(xs, median, marker="o", markersize=3, label=mode)
        axes.fill_between(xs, low, high, alpha=0.2)
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
    modes = ordered_modes(records)
    figure, axes = plt.subplots(figsize=(6.4, 4.2))
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
        axes.bar(xs, medians, width, yerr=errors, capsize=3, label=mode)
    axes.set_xticks([i + width * (len(modes) - 1) / 2 for i in range(len(operations))])
    axes.set_xticklabels(operations)
    axes.set_ylabel(f"rate ({records[0].unit}), median and range")
    axes.set_title(title)
    axes.legend()
    return _save(figure, path)


def draw(records: list[Record], out: Path) -> list[Path]:
    """One plot per benchmark, operation and metric with sizes; one bar chart per I/O
    benchmark."""
    written = []
    groups = defaultdict(list)
    for r in records:
        groups[(r.benchmark, r.operation if r.metric in SIZED else "", r.metric)].append(r)
    for (benchmark, operation, metric), mine in sorted(groups.items()):
        if metric in SIZED and len({r.bytes for r in mine}) > 1:
            name = f"{benchmark}-{operation}-{metric}".replace("/", "_").replace(" ", "_")
            title = f"{benchmark} {operation}, {mine[0].ranks} ranks"
            written.append(sized(mine, title, out / "plots" / f"{name}.png"))
        elif metric == "rate":
            title = f"{benchmark}: I/O rate per mode, {mine[0].ranks} ranks"
            written.append(rates(mine, title, out / "plots" / f"{benchmark}-rate.png"))
    return written
