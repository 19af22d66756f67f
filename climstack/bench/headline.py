"""The headline a reader wants first: per benchmark and operation group (point-to-point
latency of small and of large messages, bandwidth, each collective, each I/O layer, the
model's main loop and total runtime), each mode's slowdown against native in one number;
for a model, whether each mode's outputs are bit-identical to native's (a note on its
cell).

Per repeat, the geometric mean over sizes of the paired ratios mode/native (repeat i of the
mode with repeat i of native: the runs alternate, so a pair shares the machine's state);
the headline ratio is the median of these means over repeats, its range their lowest and
highest. Ratios are of times: for bandwidths and rates native/mode, so above 1 is always
slower."""

import math
import statistics
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass

from climstack.bench import formats
from climstack.bench.ratios import geomean, noisy
from climstack.bench.records import Failure, Problem, Record, ordered_modes

BASELINE = "native"
SMALL = 8192  # bytes: OSU's own line between small and large messages
POINT_TO_POINT = {"latency", "multi_lat", "PingPong", "PingPing", "Sendrecv", "Exchange"}
HIGHER_IS_BETTER = {"bandwidth", "rate"}
BANDWIDTHS = {"bw": "bandwidth", "bibw": "bi-directional bandwidth"}
MAIN_LOOP = "Main loop"  # the model's time stepping clock (bench.cases.MAIN_LOOP)
WITHIN = 0.05  # a whole range closer to 1 than this is "within N%"
EXPLAINED = (
    "Each cell: the verdict, then the time ratio mode/native: per repeat the geometric mean"
    " over sizes of the paired ratios (repeat i of the mode with repeat i of native), the"
    " median of these over repeats, and [their lowest and highest]. For bandwidths and"
    " rates the ratio is native/mode, so above 1 is always slower. `noisy`: the repeats"
    " disagree by more than the effect; `within N%`: every repeat is."
)


@dataclass(frozen=True)
class Group:
    benchmark: str
    name: str  # latency ≤ 8 KiB, bandwidth, allgather, MPI-IO rate, Total runtime, ...
    order: int  # its place within the benchmark's rows


@dataclass
class Cell:
    verdict: str  # "within 2%", "1.6x slower", "noisy", "failed", "no native", "-"
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    sizes: int = 0
    repeats: int = 0
    note: str = ""  # a model's: "bit-identical", or what differs from native


@dataclass
class Row:
    group: Group
    ranks: list[int]
    sizes: list[int]  # the message or data sizes the ratio is over
    cells: dict[str, Cell]


def group_of(r: Record) -> Group | None:
    """The headline row a record counts in; None: the details only (a figure that repeats
    another, as IMB's ping-pong bandwidth or benchio's times)."""
    if r.metric == "latency" and r.operation in POINT_TO_POINT:
        small = r.bytes is None or r.bytes <= SMALL
        name = "latency" if r.operation == "latency" else f"{r.operation} latency"
        return Group(r.benchmark, f"{name} {'≤' if small else '>'} 8 KiB", 0 if small else 1)
    if r.metric == "latency":
        return Group(r.benchmark, r.operation, 4)  # a collective
    if r.metric == "bandwidth" and r.operation not in POINT_TO_POINT:
        name = BANDWIDTHS.get(r.operation, f"{r.operation} bandwidth")
        return Group(r.benchmark, name, 2 if r.operation == "bw" else 3)
    if r.metric == "rate":
        return Group(r.benchmark, f"{r.operation} rate", 5)
    if r.metric == "time" and r.benchmark == "fms-clocks" and r.operation == MAIN_LOOP:
        return Group(r.benchmark, "main loop (model)", 6)
    if r.metric == "time" and r.benchmark == "fms-clocks" and r.operation == "Total runtime":
        return Group(r.benchmark, "Total runtime (model)", 7)
    return None


def verdict(ratio: float, low: float, high: float, repeats: int) -> str:
    spread = max(abs(low - 1), abs(high - 1), abs(ratio - 1))
    if spread < WITHIN:
        text = f"within {max(1, math.ceil(spread * 100 - 1e-9))}%"
    elif noisy((ratio, low, high)):
        return "noisy"
    elif ratio >= 1:
        text = f"{(ratio - 1) * 100:.0f}% slower" if ratio < 1.5 else f"{ratio:.1f}x slower"
    else:
        text = (
            f"{(1 / ratio - 1) * 100:.0f}% faster"
            if ratio > 1 / 1.5
            else f"{1 / ratio:.1f}x faster"
        )
    return text + (" (1 repeat)" if repeats == 1 else "")


def _slowdown(value: float, native: float, metric: str) -> float:
    return native / value if metric in HIGHER_IS_BETTER else value / native


def cell(records: list[Record], mode: str) -> Cell | None:
    """`mode`'s headline cell over the records of one group; None if no pair with native."""
    series = defaultdict(lambda: defaultdict(dict))  # size key -> mode -> repeat -> value
    for r in records:
        series[(r.operation, r.bytes, r.ranks, r.metric)][r.mode][r.repeat] = r.value
    per_repeat, sizes = defaultdict(list), 0  # repeat -> its paired ratios over sizes
    for (_, _, _, metric), by_mode in series.items():
        mine, native = by_mode.get(mode, {}), by_mode.get(BASELINE, {})
        pairs = [r for r in mine.keys() & native.keys() if mine[r] > 0 and native[r] > 0]
        for repeat in pairs:
            per_repeat[repeat].append(_slowdown(mine[repeat], native[repeat], metric))
        sizes += bool(pairs)
    if not per_repeat:
        return None
    means = [geomean(ratios) for ratios in per_repeat.values()]
    ratio, low, high = statistics.median(means), min(means), max(means)
    return Cell(verdict(ratio, low, high, len(means)), ratio, low, high, sizes, len(means))


def rows(records: list[Record], failures: list[Failure], notes: dict | None = None) -> list[Row]:
    """One row per group, in the formats' order; a cell per mode other than native.
    `notes`: (benchmark, mode) -> a note for that benchmark's cells (bit-identity)."""
    notes = notes or {}
    modes = [m for m in ordered_modes(records + failures) if m != BASELINE]
    failed = {(f.benchmark, f.mode) for f in failures}
    groups = defaultdict(list)
    for r in records:
        if (group := group_of(r)) is not None:
            groups[group].append(r)
    order = {name: index for index, name in enumerate(formats.FORMATS)}
    seen = list(groups)  # within a benchmark and kind, the order the outputs print
    out = []
    for group in sorted(
        groups, key=lambda g: (order.get(g.benchmark, 99), g.order, seen.index(g))
    ):
        mine, cells = groups[group], {}
        for mode in modes:
            ran = any(r.mode == mode for r in mine)
            if ran:
                cells[mode] = cell(mine, mode) or Cell("no native")
            else:
                cells[mode] = Cell("failed" if (group.benchmark, mode) in failed else "-")
            cells[mode].note = notes.get((group.benchmark, mode), "")
        sizes = sorted({r.bytes for r in mine if r.bytes is not None})
        out.append(Row(group, sorted({r.ranks for r in mine}), sizes, cells))
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
    note = f"; {c.note}" if c.note else ""
    if c.ratio is None:
        return c.verdict + note
    spread = f" [{c.low:.3f}-{c.high:.3f}]" if c.repeats > 1 else ""
    return f"**{c.verdict}**: {c.ratio:.3f}{spread}{note}"


def table(headline: list[Row]) -> tuple[list[str], list[list[str]]]:
    """The headline as a table: head and rows of text."""
    modes = list(headline[0].cells) if headline else []
    head = ["benchmark", "operation", "ranks", "sizes"] + [f"{m} / native" for m in modes]
    body = [
        [
            row.group.benchmark,
            row.group.name,
            ", ".join(map(str, row.ranks)) if any(row.ranks) else "-",
            sizes_text(row.sizes),
        ]
        + [cell_text(row.cells[m]) for m in modes]
        for row in headline
    ]
    return head, body


def summary(headline: list[Row], failures: list[Failure], problems: list[Problem]) -> dict:
    """The headline for machines (summary.json)."""
    runs = Counter((f.benchmark, f.mode, f.reason) for f in failures)
    return {
        "baseline": BASELINE,
        "ratio": EXPLAINED,
        "modes": list(headline[0].cells) if headline else [],
        "rows": [
            {
                "benchmark": row.group.benchmark,
                "operation": row.group.name,
                "ranks": row.ranks,
                "sizes": row.sizes,
                "modes": {mode: asdict(c) for mode, c in row.cells.items()},
            }
            for row in headline
        ],
        "failures": [
            {"benchmark": b, "mode": m, "reason": reason, "runs": n}
            for (b, m, reason), n in runs.items()
        ],
        "left_out": [asdict(p) for p in problems],
    }
