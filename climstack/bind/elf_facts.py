"""The ELF facts of large files kept across processes (climstack.bind.elf reads them):
verify runs once a command, and the tests and `bench abi` read the same MPI libraries and
models hundreds of times, each a few seconds through pyelftools (MOM6, libmpi). One JSON a
file under the cache's elf-facts/, keyed by the file's identity (path, device, inode, size,
mtime) and elf.py's code; an entry unused for KEPT_DAYS goes before a new one is written."""

import json
import os
import time
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

from climstack import pins
from climstack.common import atomic, stamp

FACTS_DIR = "elf-facts"
KEPT_FROM = 256 * 1024  # bytes: a smaller file costs less to read than its key
KEPT_DAYS = 30
_CODE = stamp.digest(Path(__file__).with_name("elf.py").read_bytes())


def stored(path: Path) -> Path:
    """Where the facts of `path`, as it is now, are kept."""
    stat = path.stat()
    identity = (path.resolve(), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    return pins.cache_dir() / FACTS_DIR / f"{stamp.digest(*map(str, identity), _CODE)}.json"


def saved(facts) -> str:
    """A dataclass of facts as JSON, its sets tagged (so read back as sets)."""
    return json.dumps(
        asdict(facts), default=lambda o: {"__set__": sorted(o)} if isinstance(o, set) else str(o)
    )


def loaded(text: str, kind, path: Path):
    untagged = json.loads(text, object_hook=lambda d: set(d["__set__"]) if "__set__" in d else d)
    return kind(**(untagged | {"path": path}))


def kept(path: Path, parse, kind):
    """`kind` (a dataclass) of `path`'s facts: the kept ones, else `parse(path)`'s, kept."""
    entry = stored(path)
    try:
        facts = loaded(entry.read_text(), kind, path)
        os.utime(entry)  # used: kept another KEPT_DAYS
        return facts
    except (OSError, ValueError, TypeError, KeyError):  # not kept yet, or by other code
        facts = parse(path)
        try:
            prune(entry.parent)
            atomic.write_text(entry, saved(facts))
        except OSError:  # a read-only cache: the facts are read each time
            pass
        return facts


@lru_cache(maxsize=1)
def prune(directory: Path) -> None:
    """Once a process, before its first new entry: the facts unused for KEPT_DAYS go (a file
    gone, or changed, is never asked for again)."""
    if directory.is_dir():
        oldest = time.time() - KEPT_DAYS * 86400
        for entry in directory.glob("*.json"):
            if entry.stat().st_mtime < oldest:
                entry.unlink(missing_ok=True)
