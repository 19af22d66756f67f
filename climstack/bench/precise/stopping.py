"""The precise profile's stopping rule, one function for the run and the tests: after
MIN_REPEATS repeats, a benchmark stops as soon as every headline cell of it (each mode
against native, each operation group) has a 95% interval narrower than TARGET, measured as
high / low - 1; otherwise it runs again, up to CAP repeats. A cell that cannot narrow (a
mode that failed, no native to pair with) does not hold a benchmark open."""

from dataclasses import dataclass

from climstack.bench.precise import profile
from climstack.bench.report.headline import Cell, Row


@dataclass(frozen=True)
class Rule:
    target: float = profile.TARGET
    min_repeats: int = profile.MIN_REPEATS
    cap: int = profile.CAP

    def text(self) -> str:
        return (
            f"after {self.min_repeats} repeats, a benchmark stops once every headline cell's "
            f"95% interval is narrower than {self.target:.0%} (high / low - 1), or at "
            f"{self.cap} repeats"
        )


def width(cell: Cell) -> float | None:
    """high / low - 1 of the cell's interval; None when it has none (one repeat, no pair)."""
    if cell.ratio is None or cell.low is None:
        return None
    return cell.high / cell.low - 1


def open_cells(rows: list[Row], rule: Rule) -> list[tuple[Row, str, float | None]]:
    """(row, mode, width) of each cell still too wide for `rule` (None: one repeat yet)."""
    found = []
    for row in rows:
        for mode, cell in row.cells.items():
            if cell.ratio is None:
                continue  # failed, no native: repeats would not narrow it
            w = width(cell)
            if w is None or w >= rule.target:
                found.append((row, mode, w))
    return found


def stop(rows: list[Row], repeats: int, rule: Rule) -> bool:
    """Whether a benchmark whose headline rows are `rows`, after `repeats` repeats, stops."""
    if repeats >= rule.cap:
        return True
    return repeats >= rule.min_repeats and not open_cells(rows, rule)
