"""One way to keep a built result: a cache entry is a path (file or directory) and the key
of its inputs (a digest, climstack.common.stamp). It is current while its stamp records
the key. `build` makes it at most once at a time (a lock), into a temporary sibling that
is renamed into place, the stamp written last; a twin made from the same inputs elsewhere
(the tests' copy beside the user's) is copied instead of rebuilt."""

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from climstack.common import atomic, process, progress, stamp


@dataclass(frozen=True)
class Entry:
    path: Path
    key: str
    #: where the key is recorded, relative to the result (inside it, e.g. an image's own
    #: stamp); default: beside it, `<path>.inputs`
    inside: str | None = None

    @property
    def stamp(self) -> Path:
        if self.inside:
            return self.path / self.inside
        return self.path.with_name(f"{self.path.name}.inputs")

    def at(self, path: Path) -> "Entry":
        """The same entry made elsewhere."""
        return Entry(Path(path), self.key, self.inside)

    def current(self) -> bool:
        return self.path.exists() and stamp.current(self.stamp, self.key)

    def build(
        self, fill: Callable[[Path], None], *, twin: Path | None = None, force: bool = False
    ) -> Path:
        """The result, made by fill(work) (`work`: a path that does not exist yet, where fill
        creates the file or directory) unless it is current or a current twin is copied."""
        if not force and self.current():
            return self.path
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with atomic.locked(self.path):
            if not force and self.current():  # made while this process waited
                return self.path
            scratch = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.", dir=self.path.parent))
            try:
                work = scratch / self.path.name
                if force or not (twin and self._copy_twin(twin, work)):
                    fill(work)
                self._replace(work, scratch)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        return self.path

    def _copy_twin(self, twin: Path, work: Path) -> bool:
        """Copy `twin` to `work` if it is this entry, current, somewhere else."""
        other = self.at(twin)
        if other.path.absolute() == self.path.absolute():
            return False
        with atomic.locked(other.path):
            if not other.current():
                return False
            with progress.step(f"copying {other.path}, built from the same inputs"):
                if other.path.is_dir():
                    work.mkdir()
                    process.run(
                        ["cp", "-a", "--reflink=auto", f"{other.path}/.", work],
                        f"copying {other.path}",
                    )
                else:
                    shutil.copy2(other.path, work)
        return True

    def _replace(self, work: Path, scratch: Path) -> None:
        """Put `work` in place of the old result; the stamp last (a crash leaves it stale)."""
        if self.inside:
            stamped = work / self.inside
            stamped.parent.mkdir(parents=True, exist_ok=True)
            stamped.write_text(self.key)
        else:
            self.stamp.unlink(missing_ok=True)
        if self.path.is_dir() and not self.path.is_symlink():
            os.replace(self.path, scratch / "old")
        os.replace(work, self.path)
        if not self.inside:
            atomic.write_text(self.stamp, self.key)


def once(marker: Path, key: str, step: Callable[[], None]) -> bool:
    """Run `step`, a change made in place (filling a shared mirror, compiling a clone),
    unless `marker` records `key`; the marker is written only after the step succeeded.
    Whether the step ran."""
    if stamp.current(marker, key):
        return False
    step()
    atomic.write_text(marker, key)
    return True
