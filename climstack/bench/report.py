"""Records into the field's comparison tables: per benchmark, operation and size, each
mode's median and range over repeats and its ratio to native as the median of paired
ratios (repeat i of a mode against repeat i of native: the runs alternate A B A B), flagged
where the ratios' spread is wider than the effect they claim."""

import statistics
from collections import Counter, defaultdict
from pathlib import Path

from climstack.bench.records import Failure, Problem, Record, ordered_modes
from climstack.common import atomic

BASELINE = "native"


def paired_ratio(mode: dict[int, float], native: dict[int, float]):
    """(median, low, high) of mode/native over the repeats both have, or None."""
    ratios = [mode[r] / native[r] for r in sorted(mode.keys() & native.keys()) if native[r]]
    if not ratios:
        return None
    return statistics.median(ratios), min(ratios), max(ratios)


def noisy(ratio) -> bool:
    """The ratios' spread is wider than the effect their median claims."""
    median, low, high = ratio
    return len({low, high}) > 1 and (high - low) / 2 > abs(median - 1)


def _cell(values: list[float]) -> str:
    median = statistics.median(values)
    if len(values) == 1:
        return f"{median:.4g}"
    return f"{median:.4g} ({min(values):.4g}-{max(values):.4g})"


def _ratio_cell(ratio) -> str:
    if ratio is None:
        return "-"
    median, low, high = ratio
    flag = " noisy" if noisy(ratio) else ""
    return f"{median:.3f} [{low:.3f}-{high:.3f}]{flag}"


def table(records: list[Record]) -> list[str]:
    """One Markdown table of one benchmark's records."""
    modes = ordered_modes(records)
    series = defaultdict(lambda: defaultdict(dict))  # key -> mode -> repeat -> value
    for r in records:
        series[(r.operation, r.bytes, r.ranks, r.metric, r.unit)][r.mode][r.repeat] = r.value
    head = ["operation", "bytes", "ranks", "metric"] + [f"{m}" for m in modes]
    head += [f"{m} / native" for m in modes if m != BASELINE]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in sorted(series, key=lambda k: (k[0], k[3], k[1] or 0, k[2])):
        operation, size, ranks, metric, unit = key
        by_mode = series[key]
        row = [operation, "-" if size is None else str(size), str(ranks), f"{metric} ({unit})"]
        row += [_cell(list(by_mode[m].values())) if by_mode.get(m) else "-" for m in modes]
        native = by_mode.get(BASELINE, {})
        row += [
            _ratio_cell(paired_ratio(by_mode[m], native) if by_mode.get(m) else None)
            for m in modes
            if m != BASELINE
        ]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def markdown(records: list[Record], failures: list[Failure], problems: list[Problem]) -> str:
    out = ["# Benchmark comparison", ""]
    sites = sorted({r.site for r in records})
    repeats = max((r.repeat for r in records), default=0)
    out += [
        f"Sites: {', '.join(sites) or '-'}; up to {repeats} repeats per mode, run alternating"
        " A B A B. Cells: median (min-max). Ratios: median [range] of the paired ratios"
        " mode/native (repeat i with repeat i); `noisy` marks a spread wider than the effect.",
        "",
    ]
    for benchmark in sorted({r.benchmark for r in records} | {f.benchmark for f in failures}):
        out += [f"## {benchmark}", ""]
        mine = [r for r in records if r.benchmark == benchmark]
        if mine:
            out += table(mine) + [""]
        failed = Counter((f.mode, f.reason) for f in failures if f.benchmark == benchmark)
        for (mode, reason), runs in failed.items():
            out += [f"- **{mode}: failed**: {reason} ({runs} run{'s' * (runs > 1)})"]
        out += [""]
    if problems:
        out += ["## Left out", ""] + [f"- {p}" for p in problems] + [""]
    return "\n".join(out)


def write(records, failures, problems, out: Path) -> list[Path]:
    """report.md and the plots under `out`; returns the files written."""
    from climstack.bench import plots  # matplotlib takes 0.4 s: only the commands that draw

    written = plots.draw(records, out)
    written.insert(0, atomic.write_text(out / "report.md", markdown(records, failures, problems)))
    return written
