"""The headline a reader wants first: per batch of runs (site, host, job), benchmark and
operation group (point-to-point latency of small and of large messages, bandwidth, each
collective, each I/O layer, the model's main loop and total runtime), each mode's slowdown
against native in one number with its confidence interval and verdict
(climstack.bench.report.stats: one method for the table, the plot and `make bench`); for a
model, whether each mode's outputs were bit-identical to native's (a note on its cell).

Per repeat, the geometric mean over sizes of the paired time ratios mode/native (repeat i
of the mode with repeat i of native, in one batch); over repeats, their geometric mean and
its interval. A mode faster at some sizes and slower at others says so in its cell's note,
rather than being averaged away."""

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

from climstack.bench.report import retries, stats, verdicts
from climstack.bench.results import formats
from climstack.bench.run import catalogue
from climstack.bench.results.records import (
    DIFFERS,
    IDENTICAL,
    BitCheck,
    Failure,
    Problem,
    Record,
    batch_text,
)

BASELINE = catalogue.BASELINE
SMALL = 8192  # bytes: OSU's own line between small and large messages
POINT_TO_POINT = {"latency", "multi_lat", "PingPong", "PingPing", "Sendrecv", "Exchange"}
HIGHER_IS_BETTER = {"bandwidth", "rate"}
BANDWIDTHS = {"bw": "bandwidth", "bibw": "bi-directional bandwidth"}
MAIN_LOOP = "Main loop"  # the model's time stepping clock (bench.cases.MAIN_LOOP)
STARTUP = {"launch": "launch of /bin/true", "MPI_Init": "MPI_Init (osu_init)"}
EXPLAINED = (
    "Each cell: the verdict, then the time ratio mode/native (for bandwidths and rates"
    " native/mode, so above 1 is always slower) with its interval and the number of"
    f" repeats. Method: per repeat the geometric mean over sizes of the paired ratios (repeat"
    f" i of the mode with repeat i of native, in one batch of runs), then the {stats.METHOD},"
    " never narrower than the outputs' printed digits allow (0.21 vs 0.21: 0.95-1.05)."
    f" `within {stats.WITHIN:.0%}`: the whole interval lies within 1 ± {stats.WITHIN:g};"
    " `N% slower/faster`: it excludes 1; else `inconclusive`."
    + verdicts.EXPLAINED
    + " A run that hung and was run again is named in its cells, with the attempt timed."
)


@dataclass(frozen=True)
class Group:
    batch: tuple[str, str, str]  # (site, host, job): runs are paired within one
    benchmark: str
    name: str  # latency ≤ 8 KiB, bandwidth, allgather, MPI-IO rate, Total runtime, ...
    order: int  # its place within the benchmark's rows


@dataclass
class Cell:
    verdict: str  # "within 2%", "1.6x slower", "inconclusive (3 repeats)", "failed", "-"
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    sizes: int = 0
    repeats: int = 0
    note: str = ""  # a model's: "bit-identical", or what differs from native
    effects: str = ""  # sizes whose intervals go opposite ways (stats.opposite)
    retried: list = field(default_factory=list)  # its pairs' runs that hung (retries.of)


@dataclass
class Row:
    group: Group
    ranks: list[int]
    sizes: list[int]  # the message or data sizes the ratio is over
    cells: dict[str, Cell]
    control: Cell | None = None  # the control against bind, in a batch that ran it


def group_of(r: Record) -> Group | None:
    """The headline row a record counts in; None: the details only (a figure that repeats
    another, as IMB's ping-pong bandwidth or benchio's times)."""
    b, model = r.benchmark, formats.format_of(r.benchmark) == "fms-clocks"
    if r.metric == "latency" and r.operation in POINT_TO_POINT:
        small = r.bytes is None or r.bytes <= SMALL
        name = "latency" if r.operation == "latency" else f"{r.operation} latency"
        return Group(r.batch, b, f"{name} {'≤' if small else '>'} 8 KiB", 0 if small else 1)
    if r.metric == "latency":
        return Group(r.batch, b, r.operation, 4)  # a collective
    if r.metric == "bandwidth" and r.operation not in POINT_TO_POINT:
        name = BANDWIDTHS.get(r.operation, f"{r.operation} bandwidth")
        return Group(r.batch, b, name, 2 if r.operation == "bw" else 3)
    if r.metric == "rate":
        return Group(r.batch, b, f"{r.operation} rate", 5)
    if r.metric == "time" and model and r.operation == MAIN_LOOP:
        return Group(r.batch, b, "main loop (model)", 6)
    if r.metric == "time" and model and r.operation == "Total runtime":
        return Group(r.batch, b, "Total runtime (model)", 7)
    if r.metric == "time" and formats.format_of(b) == "startup":
        return Group(r.batch, b, STARTUP.get(r.operation, r.operation), 8)
    return None


def _series(records: list[Record]) -> dict:
    """(operation, bytes, ranks, metric) -> mode -> repeat -> record, of one batch's."""
    series = defaultdict(lambda: defaultdict(dict))
    for r in records:
        series[(r.operation, r.bytes, r.ranks, r.metric)][r.mode][r.repeat] = r
    return series


def _paired(records: list[Record], mode: str, baseline: str) -> tuple[dict, dict]:
    """(repeat -> its ratios over sizes, size -> its Estimate over repeats) of `mode`
    against `baseline`."""
    per_repeat, per_size = defaultdict(list), {}
    for (_, size, _, metric), by_mode in _series(records).items():
        mine, native = by_mode.get(mode, {}), by_mode.get(baseline, {})
        ratios = stats.paired(mine, native, rate=metric in HIGHER_IS_BETTER)
        for repeat, ratio in ratios.items():
            per_repeat[repeat].append(ratio)
        if ratios:
            per_size[size] = stats.estimate(ratios.values())
    return per_repeat, per_size


def repeat_ratios(records: list[Record], mode: str, baseline=BASELINE) -> dict[int, stats.Ratio]:
    """repeat -> `mode`'s ratio to `baseline` over the group's sizes: what a cell's
    interval is computed from (the precise profile's simulations resample them)."""
    per_repeat, _ = _paired(records, mode, baseline)
    return {repeat: stats.combined(ratios) for repeat, ratios in sorted(per_repeat.items())}


def cell(
    records: list[Record], mode: str, baseline: str = BASELINE, control: bool | None = None
) -> Cell | None:
    """`mode`'s headline cell over the records of one group, against `baseline`, its
    verdict verdicts.judge's (`control`: whether the row's control was found; None: its
    batch ran none); None if no pair."""
    per_repeat, per_size = _paired(records, mode, baseline)
    if not per_repeat:
        return None
    e = stats.estimate(stats.combined(ratios) for ratios in per_repeat.values())
    return Cell(
        verdicts.judge(e, control), e.ratio, e.low, e.high, len(per_size), e.repeats,
        effects=stats.opposite(per_size),
        retried=retries.of(records, {mode, baseline}, per_repeat.keys()),
    )  # fmt: skip


def control_cell(records: list[Record], failed: bool = False) -> Cell:
    """The control's cell against bind in one group (verdicts.of_control: found or not),
    or why it has none: it failed, or no pairs (no bind run of its repeats)."""
    found = cell(records, catalogue.CONTROL, catalogue.CONTROL_OF)
    if found is None:
        ran = any(r.mode == catalogue.CONTROL for r in records)
        return Cell("no pairs" if ran else "failed" if failed else "-")
    found.verdict = verdicts.of_control(
        stats.Estimate(found.ratio, found.low, found.high, found.repeats)
    )
    return found


def bit_notes(checks: list[BitCheck]) -> dict[tuple, str]:
    """(batch, benchmark, mode) -> "bit-identical (N runs)", or what differed from native,
    or why the comparison failed."""
    by = defaultdict(list)
    for c in checks:
        by[((c.site, c.host, c.job), c.benchmark, c.mode)].append(c)
    notes = {}
    for key, mine in by.items():
        differ = [c for c in mine if c.verdict == DIFFERS]
        failed = [c for c in mine if c.verdict not in (IDENTICAL, DIFFERS)]
        if differ:
            notes[key] = f"NOT bit-identical (repeat {differ[0].repeat}: {differ[0].detail})"
        elif failed:
            notes[key] = f"not compared (repeat {failed[0].repeat}: {failed[0].detail})"
        else:
            notes[key] = f"bit-identical ({len(mine)} run{'s' * (len(mine) != 1)})"
    return notes


def grouped(records: list[Record]) -> dict[Group, list[Record]]:
    """The records of each headline group, in the order the outputs print them."""
    groups = defaultdict(list)
    for r in records:
        if (group := group_of(r)) is not None:
            groups[group].append(r)
    return groups


def rows(records: list[Record], failures: list[Failure], checks=()) -> list[Row]:
    """One row per batch and group, in the formats' order; a cell per mode other than
    native (a benchmark never run natively has none). `checks`: the model runs'
    bit-for-bit comparisons (a note on their cells)."""
    notes = bit_notes(list(checks))
    modes = [
        m for m in catalogue.ordered({x.mode for x in [*records, *failures]}) if m != BASELINE
    ]
    failed = {((f.site, f.host, f.job), f.benchmark, f.mode) for f in failures}
    # benchmarks run (or tried) natively somewhere; the others have no row
    natively = {x.benchmark for x in [*records, *failures] if x.mode == BASELINE}
    groups = grouped(records)
    gated = verdicts.ran_control([*records, *failures])
    seen = list(groups)  # within a benchmark and kind, the order the outputs print
    out = []
    for group in sorted(
        groups,
        key=lambda g: (g.batch, formats.rank(g.benchmark), g.benchmark, g.order, seen.index(g)),
    ):
        mine, cells, control = groups[group], {}, None
        if group.benchmark not in natively:  # the I/O layers, in the image only: no ratio
            continue
        if group.batch in gated:
            key = (group.batch, group.benchmark, catalogue.CONTROL)
            control = control_cell(mine, key in failed)
        found = None if control is None else verdicts.caught(control)
        for mode in modes:
            key = (group.batch, group.benchmark, mode)
            if any(r.mode == mode for r in mine):
                gate = None if mode == catalogue.CONTROL else found
                cells[mode] = cell(mine, mode, control=gate) or Cell("no native")
            else:
                cells[mode] = Cell("failed" if key in failed else "-")
            cells[mode].note = notes.get(key, "")
        sizes = sorted({r.bytes for r in mine if r.bytes is not None})
        out.append(Row(group, sorted({r.ranks for r in mine}), sizes, cells, control))
    return out


def size_text(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def sizes_text(sizes: list[int]) -> str:
    if not sizes:
        return "-"
    if len(sizes) == 1:
        return size_text(sizes[0])
    return f"{size_text(sizes[0])}-{size_text(sizes[-1])} ({len(sizes)})"


def cell_text(c: Cell) -> str:
    note = "".join(f"; {n}" for n in (c.effects, c.note, retries.text(c.retried)) if n)
    if c.ratio is None:
        return c.verdict + note
    e = stats.Estimate(c.ratio, c.low, c.high, c.repeats)
    return f"**{c.verdict}**: {stats.interval_text(e)}{note}"


def batches(headline: list[Row]) -> list[tuple]:
    return list(dict.fromkeys(row.group.batch for row in headline))


def table(headline: list[Row]) -> tuple[list[str], list[list[str]]]:
    """The headline as a table: head and rows of text; a column naming each row's batch
    of runs when there are several (they are never paired with each other)."""
    modes = list(headline[0].cells) if headline else []
    several = len(batches(headline)) > 1
    controlled = any(row.control for row in headline)
    head = ["runs"] * several + ["benchmark", "operation", "ranks", "sizes"]
    head += [f"{m} / native" for m in modes]
    head += [f"control / {catalogue.CONTROL_OF}"] * controlled
    body = [
        [batch_text(row.group.batch)] * several
        + [
            row.group.benchmark,
            row.group.name,
            ", ".join(map(str, row.ranks)) if any(row.ranks) else "-",
            sizes_text(row.sizes),
        ]
        + [cell_text(row.cells[m]) for m in modes]
        + [cell_text(row.control) if row.control else "-"] * controlled
        for row in headline
    ]
    return head, body


def _control(c: Cell) -> dict:
    return asdict(c) | {"against": catalogue.CONTROL_OF, "found": verdicts.caught(c)}


def summary(headline: list[Row], failures: list[Failure], problems: list[Problem]) -> dict:
    """The headline for machines (summary.json)."""
    runs = Counter((f.benchmark, f.mode, f.reason) for f in failures)
    return {
        "baseline": BASELINE,
        "ratio": EXPLAINED,
        "method": stats.METHOD,
        "within": stats.WITHIN,
        "modes": list(headline[0].cells) if headline else [],
        "rows": [
            {
                "site": row.group.batch[0],
                "host": row.group.batch[1],
                "job": row.group.batch[2],
                "benchmark": row.group.benchmark,
                "operation": row.group.name,
                "ranks": row.ranks,
                "sizes": row.sizes,
                "modes": {mode: asdict(c) for mode, c in row.cells.items()},
            }
            | ({"control": _control(row.control)} if row.control else {})
            for row in headline
        ],
        "failures": [
            {"benchmark": b, "mode": m, "reason": reason, "runs": n}
            for (b, m, reason), n in runs.items()
        ],
        "left_out": [asdict(p) for p in problems],
    }
