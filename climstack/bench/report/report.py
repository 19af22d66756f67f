"""Records into the report a reader reads top down: the headline (climstack.bench.report.headline)
and its plot, the failed runs and what was left out, then per batch of runs and benchmark
the field's comparison tables: per operation and size, each mode's median and range over
repeats and its ratio to native with the interval and verdict of climstack.bench.report.stats (the
headline's method, per size). Written as report.md, report.html (climstack.bench.report.page) and
summary.json, from one list of blocks."""

import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from climstack.bench.report import headline, page, retries, seeds, stats, verdicts
from climstack.bench.results import formats
from climstack.bench.run import catalogue
from climstack.bench.results.records import Failure, Problem, Record, batch_text
from climstack.common import atomic

BASELINE = headline.BASELINE
__all__ = ["markdown", "table", "write"]


def _cell(values: list[float]) -> str:
    median = statistics.median(values)
    if len(values) == 1:
        return f"{median:.4g}"
    return f"{median:.4g} ({min(values):.4g}-{max(values):.4g})"


def _estimate(mine: dict, native: dict, metric: str) -> stats.Estimate | None:
    return stats.estimate(stats.paired(mine, native, metric in headline.HIGHER_IS_BETTER).values())


def _ratio_cell(mine: dict, native: dict, metric: str, control: bool | None) -> str:
    """The estimate at one size and its verdict (verdicts.judge: `control`, whether the
    control was found at this size; None: the batch ran none)."""
    e = _estimate(mine, native, metric)
    return "-" if e is None else f"{stats.interval_text(e)} {verdicts.judge(e, control)}"


def _control_found(by_mode: dict, metric: str, gated: bool) -> bool | None:
    """Whether the control, against bind, was found at one size; None: not gated."""
    if not gated:
        return None
    mine, bind = by_mode.get(catalogue.CONTROL, {}), by_mode.get(catalogue.CONTROL_OF, {})
    return verdicts.caught(_estimate(mine, bind, metric))


def detail(records: list[Record], gated: bool | None = None) -> tuple[list[str], list[list[str]]]:
    """One benchmark's comparison table (records of one batch): head and rows; `gated`:
    whether the batch ran the control (None: whether these records hold it)."""
    modes = catalogue.ordered({r.mode for r in records})
    gated = catalogue.CONTROL in modes if gated is None else gated
    series = defaultdict(lambda: defaultdict(dict))  # key -> mode -> repeat -> record
    for r in records:
        series[(r.operation, r.bytes, r.ranks, r.metric, r.unit)][r.mode][r.repeat] = r
    head = ["operation", "bytes", "ranks", "metric"] + [f"{m}" for m in modes]
    head += [f"{m} / native" for m in modes if m != BASELINE]
    body = []
    for key in sorted(series, key=lambda k: (k[0], k[3], k[1] or 0, k[2])):
        operation, size, ranks, metric, unit = key
        by_mode = series[key]
        row = [operation, "-" if size is None else str(size), str(ranks or "-")]
        row += [f"{metric} ({unit})"]
        row += [
            _cell([r.value for r in by_mode[m].values()]) if by_mode.get(m) else "-" for m in modes
        ]
        native, found = by_mode.get(BASELINE, {}), _control_found(by_mode, metric, gated)
        row += [
            (
                _ratio_cell(by_mode[m], native, metric, None if m == catalogue.CONTROL else found)
                if by_mode.get(m)
                else "-"
            )
            for m in modes
            if m != BASELINE
        ]
        body.append(row)
    return head, body


def table(records: list[Record]) -> list[str]:
    """One Markdown table of one benchmark's records."""
    return page.markdown_table(*detail(records))


def order_text(records: list[Record]) -> str:
    """How a batch's runs were ordered, as far as its headers say."""
    if records and all(r.order for r in records):
        said = "interleaved: each repeat ran every mode once, the mode order rotated per repeat"
    else:
        said = (
            "repeat numbers from the headers or the file order; whether the runs were"
            " interleaved is not recorded"
        )
    return said + retries.batch_text(records)


def _repeats(count: int) -> str:
    return f"{count} repeat{'s' * (count != 1)}"


def _runs(count: int) -> str:
    return f"{count} run{'s' * (count > 1)}"


def _failed_items(failures: list[Failure]) -> list[str]:
    """One line per benchmark and reason: the modes that failed with it."""
    by = defaultdict(Counter)
    for f in failures:
        by[(f.benchmark, f.reason)][f.mode] += 1
    order = catalogue.ordered({f.mode for f in failures})
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


def blocks(records, failures, problems, plots: dict[str, Path], checks=()) -> list[tuple]:
    """The report as blocks (page.py): ("h1"|"h2"|"p", text), ("table", head, rows),
    ("ul", items), ("img", path, alt). `plots`: benchmark or "summary" -> its PNG; `checks`:
    the model runs' bit-for-bit comparisons."""
    by_batch = defaultdict(list)
    for r in records:
        by_batch[r.batch].append(r)
    rows = headline.rows(records, failures, checks)
    out = [("h1", "Benchmark comparison")]
    runs = [
        f"{batch_text(batch)}: up to {_repeats(max(r.repeat for r in mine))} per mode; "
        + order_text(mine)
        for batch, mine in by_batch.items()
    ]
    out += (
        [
            (
                "p",
                "Native is the baseline. Runs are paired only within one batch (site, host, job):",
            ),
            ("ul", runs),
        ]
        if runs
        else []
    )
    out += [("h2", "Headline")]
    if rows:
        out += [("table", *headline.table(rows)), ("p", headline.EXPLAINED)]
    if modes := {x.mode for x in [*records, *failures]}:
        out += [("table", ["mode", "what runs", "published as"], catalogue.legend(modes))]
    else:
        out += [("p", "No results to compare: no benchmark output was read.")]
    if "summary" in plots:
        out += [("img", plots["summary"], "time ratio to native per mode and benchmark")]
    out += seeds.blocks(records)
    if failures:
        out += [("h2", "Failed runs"), ("ul", _failed_items(failures))]
    if problems:
        out += [("h2", "Left out"), ("ul", _left_out_items(problems))]
    out += [
        ("h2", "Details"),
        (
            "p",
            "Cells: median (min-max) over repeats. Ratios: per size, the geometric mean of"
            f" the paired ratios mode/native over repeats, its {stats.METHOD.split(' of ')[0]}"
            " and n, then the verdict (the headline's rule).",
        ),
    ]
    present = {r.benchmark for r in records} | {f.benchmark for f in failures}
    gated = verdicts.ran_control([*records, *failures])
    several = len(by_batch) > 1
    for benchmark in sorted(present, key=lambda b: (formats.rank(b), b)):
        out += [("h2", benchmark)]
        for batch, mine in by_batch.items():
            mine = [r for r in mine if r.benchmark == benchmark]
            if mine:
                out += [("p", f"Runs: {batch_text(batch)}")] if several else []
                out += [("table", *detail(mine, batch in gated))]
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


def write(records, failures, problems, out: Path, checks=()) -> list[Path]:
    """report.md, report.html, summary.json and the plots under `out`; the files written."""
    from climstack.bench.report import plots  # matplotlib takes 0.4 s: only the commands that draw

    rows = headline.rows(records, failures, checks)
    drawn = plots.draw(records, out)
    by_benchmark = defaultdict(list)
    for benchmark, path in drawn:
        by_benchmark[benchmark].append(path)
    if rows:
        by_benchmark["summary"] = plots.summary(rows, out / "plots" / "summary.png")
    document = blocks(records, failures, problems, by_benchmark, checks)
    summary = headline.summary(rows, failures, problems)
    written = [
        atomic.write_text(out / "report.md", page.markdown(document, out)),
        atomic.write_text(out / "report.html", page.to_html(document)),
        atomic.write_text(out / "summary.json", json.dumps(summary, indent=1) + "\n"),
    ]
    return written + ([by_benchmark["summary"]] if rows else []) + [p for _, p in drawn]
