"""The run matrix, computed once: every run of a comparison (benchmark, mode, repeat, its
place in the repeat's order, the Lustre stripe setting) in the order it runs. The local
executor (climstack.bench.run.runner) and the centre's job script (climstack.bench.run.jobs) both
render this list, so a comparison runs the same way here and at a centre.

Within a repeat every mode runs once; the mode order is rotated from one repeat to the
next (repeat r starts at mode r), so that over as many repeats as modes each mode runs in
each place once and no mode always runs first (warm caches, the page cache of the I/O
benchmarks). A stripe sweep runs every mode per setting, the settings in their order."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Run:
    benchmark: str  # runner.Benchmark's name
    mode: str
    repeat: int  # 1, 2, ...
    order: int  # its place in the repeat's mode order (per stripe setting), from 1
    stripe: tuple[int, str] | None = None  # (count, size) of a Lustre stripe setting


def rotated(modes: list[str], repeat: int) -> list[str]:
    """The mode order of `repeat` (from 1): `modes` rotated by repeat - 1."""
    if not modes:
        return []
    turn = (repeat - 1) % len(modes)
    return list(modes[turn:]) + list(modes[:turn])


def runs(
    comparisons: list[tuple[str, list[str]]],
    repeats: int,
    stripes: dict[str, list[tuple[int, str]]] | None = None,
) -> list[Run]:
    """Every run of `comparisons` ((benchmark, its modes) each), repeat after repeat; a
    benchmark in `stripes` runs its modes once per stripe setting."""
    stripes = stripes or {}
    found = []
    for repeat in range(1, repeats + 1):
        for benchmark, modes in comparisons:
            for stripe in stripes.get(benchmark) or [None]:
                for order, mode in enumerate(rotated(modes, repeat), start=1):
                    found.append(Run(benchmark, mode, repeat, order, stripe))
    return found
