"""The two libraries the precise profile preloads into every rank of every mode, built
here from their C sources: affinity.c (each rank's CPUs, read from inside the run) and
slowdown.c (the control's fast clocks; a no-op at share 0, so the control differs from
bind by one number only)."""

import shutil
from dataclasses import replace
from pathlib import Path

from climstack.common import process
from climstack.errors import ClimstackError

SOURCES = Path(__file__).parent
AFFINITY, SLOWDOWN = "affinity", "slowdown"
LOG_VARIABLE, SHARE_VARIABLE = "CLIMSTACK_AFFINITY_LOG", "CLIMSTACK_SLOWDOWN"


def build(into: Path) -> dict[str, Path]:
    """Each library, compiled into `into` (which the containers see at the same path)."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if not compiler:
        raise ClimstackError("no C compiler to build the precise profile's shims",
                             fix="apt-get install gcc (bin/setup)")  # fmt: skip
    into.mkdir(parents=True, exist_ok=True)
    built = {}
    for name in (AFFINITY, SLOWDOWN):
        library = into / f"lib{name}.so"
        process.run(
            [compiler, "-O2", "-fPIC", "-shared", "-o", library, SOURCES / f"{name}.c", "-ldl"],
            f"building {library.name}",
        )
        built[name] = library
    return built


def prefix(libraries: dict[str, Path], log: Path, share: float) -> list[str]:
    """What a rank's command starts with: `env` preloading both, the log directory of
    this run's affinity records and the clock's share."""
    preload = ":".join(str(libraries[n]) for n in (AFFINITY, SLOWDOWN))
    return ["/usr/bin/env", f"LD_PRELOAD={preload}", f"{LOG_VARIABLE}={log}",
            f"{SHARE_VARIABLE}={share:g}"]  # fmt: skip


def shimmed(mode, libraries: dict[str, Path], log: Path, share: float):
    """`mode` (climstack.bench.run.modes.Mode) with both shims preloaded into each rank."""
    first = prefix(libraries, log, share)
    return replace(mode, wrap=lambda program, cwd=None: mode.wrap([*first, *program], cwd))


def read_affinity(log: Path) -> dict[str, str]:
    """rank -> its CPUs ("0", "0,1"), from the records the ranks wrote into `log`."""
    ranks = {}
    for record in sorted(log.glob("*")) if log.is_dir() else []:
        fields = dict(w.split("=", 1) for w in record.read_text().split() if "=" in w)
        if "rank" in fields and "cpus" in fields:
            ranks[fields["rank"]] = fields["cpus"]
    return ranks


def pinned(ranks: dict[str, str], expected: int) -> bool:
    """Whether each of `expected` ranks ran on one CPU of its own."""
    cpus = list(ranks.values())
    return (
        len(cpus) == expected
        and all("," not in c and "-" not in c for c in cpus)
        and len(set(cpus)) == len(cpus)
    )
