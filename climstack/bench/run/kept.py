"""The report directories a `climstack bench` run writes into the cache by default
(bench/<kind>-YYYYmmdd-HHMMSS): 1.7 GB for `bench abi`, 2.3 GB for `bench local` (the
models' outputs, NetCDF files), one more per run that measures again. A new one leaves the
newest KEEP of its kind: the one `--reuse` finds and the records the tests read
(`abi.recorded`) are among them, and a disk is not filled by CI runs one after another."""

import re
import shutil
from pathlib import Path

from climstack import pins

KEEP = 3
NAME = re.compile(r"(?P<kind>[a-z]+)-\d{8}-\d{6}")


def prune(out: Path, keep: int = KEEP) -> list[Path]:
    """After a run wrote `out`: the older directories of its kind beyond the newest `keep`
    removed, `out` always kept; those removed, oldest first. Nothing for a directory named
    by --out elsewhere or otherwise."""
    bench = pins.cache_dir() / "bench"
    found = NAME.fullmatch(out.name)
    if not found or out.parent.resolve() != bench.resolve():
        return []
    runs = sorted(p for p in bench.glob(f"{found['kind']}-*") if NAME.fullmatch(p.name))
    old = [p for p in runs[:-keep] if p.is_dir() and p.resolve() != out.resolve()]
    for path in old:
        shutil.rmtree(path, ignore_errors=True)
    return old
