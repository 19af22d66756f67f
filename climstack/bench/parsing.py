"""What every output parser shares: the Measurement it yields, the numbered lines it
reads, and the rule that a line it cannot read is warned about, never dropped silently."""

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass
class Measurement:
    line: int
    operation: str
    bytes: int | None
    metric: str
    value: float
    unit: str
    ranks: int | None = None


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
    return [float(field) for field in fields]


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
    """read(number, text) per line; a Garbled line is warned about and left out."""
    for number, text in lines:
        try:
            yield from read(number, text)
        except Garbled as err:
            warn(number, str(err))
