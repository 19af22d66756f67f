"""Records into the report a reader reads top down: the headline (climstack.bench.headline)
and its plot, the failed runs and what was left out, then per benchmark the field's
comparison tables: per operation and size, each mode's median and range over repeats and
its ratio to native as the median of paired ratios (repeat i of a mode against repeat i
of native: the runs alternate A B A B), flagged where the ratios' spread is wider than the
effect they claim. Written as report.md, report.html (climstack.bench.page) and
summary.json, from one list of blocks."""

import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from climstack.bench import formats, headline, page
from climstack.bench.ratios import noisy, paired_ratio
from climstack.bench.records import (
    BITWISE,
    IDENTICAL,
    MODE_NAMES,
    Failure,
    Problem,
    Record,
    ordered_modes,
)
from climstack.common import atomic

BASELINE = headline.BASELINE
__all__ = ["markdown", "noisy", "paired_ratio", "table", "write"]


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


def detail(records: list[Record]) -> tuple[list[str], list[list[str]]]:
    """One benchmark's comparison table: head and rows."""
    modes = ordered_modes(records)
    series = defaultdict(lambda: defaultdict(dict))  # key -> mode -> repeat -> value
    for r in records:
        series[(r.operation, r.bytes, r.ranks, r.metric, r.unit)][r.mode][r.repeat] = r.value
    head = ["operation", "bytes", "ranks", "metric"] + [f"{m}" for m in modes]
    head += [f"{m} / native" for m in modes if m != BASELINE]
    body = []
    for key in sorted(series, key=lambda k: (k[0], k[3], k[1] or 0, k[2])):
        operation, size, ranks, metric, unit = key
        by_mode = series[key]
        row = [operation, "-" if size is None else str(size), str(ranks or "-")]
        row += [f"{metric} ({unit})"]
        row += [_cell(list(by_mode[m].values())) if by_mode.get(m) else "-" for m in modes]
        native = by_mode.get(BASELINE, {})
        row += [
            _ratio_cell(paired_ratio(by_mode[m], native) if by_mode.get(m) else None)
            for m in modes
            if m != BASELINE
        ]
        body.append(row)
    return head, body


def table(records: list[Record]) -> list[str]:
    """One Markdown table of one benchmark's records."""
    return page.markdown_table(*detail(records))


def _runs(count: int) -> str:
    return f"{count} run{'s' * (count > 1)}"


def _failed_items(failures: list[Failure]) -> list[str]:
    """One line per benchmark and reason: the modes that failed with it."""
    by = defaultdict(Counter)
    for f in failures:
        by[(f.benchmark, f.reason)][f.mode] += 1
    order = ordered_modes(failures)
    return [
        f"**{benchmark}** failed in {', '.join(sorted(modes, key=order.index))}"
        f" ({_runs(sum(modes.values()))}): {reason}"
        for (benchmark, reason), modes in by.items()
    ]


SHOWN = 3  # problems listed per file; the rest are counted


def _left_out_items(problems: list[Problem]) -> list[str]:
    """Per file its first problems, then how many more (all of them go to stderr)."""
    by_path = defaultdict(list)
    for p in problems:
        by_path[p.path].append(p)
    items = []
    for path, mine in by_path.items():
        items += [
            f"`{path}` line {p.line}: {p.message}" + (f". Fix: {p.fix}" if p.fix else "")
            for p in mine[:SHOWN]
        ]
        if len(mine) > SHOWN:
            items += [f"`{path}`: {len(mine) - SHOWN} more lines left out"]
    return items


def bit_notes(out: Path) -> dict[tuple[str, str], str]:
    """(benchmark, mode) -> "bit-identical (N runs)" or what differed from native, from the
    runner's comparison of each model run with native's (runner.BITWISE), if there is one."""
    path = out / BITWISE
    if not path.is_file():
        return {}
    notes = {}
    for benchmark, by_mode in json.loads(path.read_text()).items():
        for mode, by_repeat in by_mode.items():
            differ = [f"repeat {r}: {what}" for r, what in by_repeat.items() if what != IDENTICAL]
            notes[(benchmark, mode)] = (
                f"NOT bit-identical ({differ[0]})" if differ
                else f"bit-identical ({len(by_repeat)} runs)"
            )  # fmt: skip
    return notes


def blocks(records, failures, problems, plots: dict[str, Path], notes=None) -> list[tuple]:
    """The report as blocks (page.py): ("h1"|"h2"|"p", text), ("table", head, rows),
    ("ul", items), ("img", path, alt). `plots`: benchmark or "summary" -> its PNG; `notes`:
    bit_notes."""
    sites = sorted({r.site for r in records} - {"unknown"})
    repeats = max((r.repeat for r in records), default=0)
    rows = headline.rows(records, failures, notes)
    out = [
        ("h1", "Benchmark comparison"),
        (
            "p",
            f"Sites: {', '.join(sites) or '-'}; up to {repeats} repeats per mode, run"
            " alternating A B A B; native is the baseline.",
        ),
        ("h2", "Headline"),
    ]
    if rows:
        out += [("table", *headline.table(rows)), ("p", headline.EXPLAINED)]
    if modes := ordered_modes([*records, *failures]):
        legend = [[m, *MODE_NAMES.get(m, ("-", "-"))] for m in modes]
        out += [("table", ["mode", "what runs", "published as"], legend)]
    else:
        out += [("p", "No results to compare: no benchmark output was read.")]
    if "summary" in plots:
        out += [("img", plots["summary"], "time ratio to native per mode and benchmark")]
    if failures:
        out += [("h2", "Failed runs"), ("ul", _failed_items(failures))]
    if problems:
        out += [("h2", "Left out"), ("ul", _left_out_items(problems))]
    out += [
        ("h2", "Details"),
        (
            "p",
            "Cells: median (min-max) over repeats. Ratios: median [range] of the paired"
            " ratios mode/native (repeat i with repeat i); `noisy` marks a spread wider than"
            " the effect.",
        ),
    ]
    order = list(formats.FORMATS)  # as the headline: C OSU first, the model last
    present = {r.benchmark for r in records} | {f.benchmark for f in failures}
    for benchmark in sorted(present, key=lambda b: (order.index(b) if b in order else 99, b)):
        out += [("h2", benchmark)]
        mine = [r for r in records if r.benchmark == benchmark]
        if mine:
            out += [("table", *detail(mine))]
        failed = Counter((f.mode, f.reason) for f in failures if f.benchmark == benchmark)
        items = [
            f"**{mode}: failed**: {reason} ({_runs(runs)})"
            for (mode, reason), runs in failed.items()
        ]
        out += [("ul", items)] if items else []
        out += [("img", path, f"{benchmark}: {path.stem}") for path in plots.get(benchmark, [])]
    return out


def markdown(records: list[Record], failures: list[Failure], problems: list[Problem]) -> str:
    """report.md without plots."""
    return page.markdown(blocks(records, failures, problems, {}), Path("."))


def write(records, failures, problems, out: Path) -> list[Path]:
    """report.md, report.html, summary.json and the plots under `out`; the files written."""
    from climstack.bench import plots  # matplotlib takes 0.4 s: only the commands that draw

    notes = bit_notes(out)
    rows = headline.rows(records, failures, notes)
    drawn = plots.draw(records, out)
    by_benchmark = defaultdict(list)
    for benchmark, path in drawn:
        by_benchmark[benchmark].append(path)
    if rows:
        by_benchmark["summary"] = plots.summary(rows, out / "plots" / "summary.png")
    document = blocks(records, failures, problems, by_benchmark, notes)
    summary = headline.summary(rows, failures, problems)
    written = [
        atomic.write_text(out / "report.md", page.markdown(document, out)),
        atomic.write_text(out / "report.html", page.to_html(document)),
        atomic.write_text(out / "summary.json", json.dumps(summary, indent=1) + "\n"),
    ]
    return written + ([by_benchmark["summary"]] if rows else []) + [p for _, p in drawn]
