"""What every output parser shares: the Measurement it yields, the numbered lines it
reads, the numbers as printed (Printed: a value and the step of its last digit), and the
rules that a line it cannot read, or a value that is no positive finite number (0, nan,
inf: no ratio can be taken of it), is warned about, never dropped silently."""

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass


class Printed(float):
    """A number as a program printed it: its value, and `step`, one unit of its last digit
    (0.01 for `13.07`, 1 for `400`, 1e-4 for `1.5e-3`): what the print cannot tell apart."""

    step: float

    def __new__(cls, text: str):
        value = super().__new__(cls, text)
        mantissa, _, exponent = text.strip().lower().partition("e")
        decimals = len(mantissa.partition(".")[2]) if math.isfinite(value) else 0
        value.step = 10.0 ** (int(exponent or 0) - decimals) if math.isfinite(value) else 0.0
        return value


@dataclass
class Measurement:
    line: int
    operation: str
    bytes: int | None
    metric: str
    value: float
    unit: str
    ranks: int | None = None
    resolution: float = 0.0  # the printed step of `value` (Printed); 0: not known

    def __post_init__(self):
        if isinstance(self.value, Printed):
            self.resolution = self.resolution or self.value.step
        self.value = float(self.value)


class Garbled(Exception):
    """A line where a result should be, that does not read as one."""


Lines = list[tuple[int, str]]
Warn = Callable[[int, str], None]
#: parser(lines, warn, operation): `operation` names a table that has no title line
Parser = Callable[[Lines, Warn, str], Iterator[Measurement]]


def _numbers(text: str, count: int) -> list[float]:
    fields = text.split()[:count]
    if len(fields) < count or not all(_is_number(field) for field in fields):
        raise Garbled(f"expected {count} numbers, read {text.strip()!r}")
    return [Printed(field) for field in fields]


def _match(pattern: re.Pattern, text: str, what: str) -> list[str]:
    """The groups of `pattern` in `text`, whose numeric groups must read as numbers."""
    found = pattern.search(text)
    if not found or not all(
        _is_number(g) for g in found.groups() if g and g[0] in "+-.0123456789"
    ):
        raise Garbled(f"not {what}: {text.strip()!r}")
    return list(found.groups())


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _lines(lines: Lines, warn: Warn, read) -> Iterator[Measurement]:
    """read(number, text) per line; a Garbled line, or a measurement that is no positive
    finite number, is warned about and left out."""
    for number, text in lines:
        try:
            for found in read(number, text):
                if math.isfinite(found.value) and found.value > 0:
                    yield found
                else:
                    warn(number, _not_positive(found, text))
        except Garbled as err:
            warn(number, str(err))


def _not_positive(found: Measurement, text: str) -> str:
    return (
        f"{found.operation} {found.metric} {found.value:g} {found.unit} is no positive finite "
        "measurement (a 0, nan or inf, or a value under the printed resolution, has no ratio)"
        f": {text.strip()!r}"
    )
