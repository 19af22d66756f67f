"""Write files and directories so that a reader sees the old version or the complete new
one, never half: fill a temporary sibling, then rename it into place. Builders of the same
cached result take turns (`locked`): the second waits, then finds the first one's result."""

import fcntl
import hashlib
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from climstack.errors import ClimstackError


@contextmanager
def locked(path: Path, shared: bool = False):
    """Hold a lock for `path` while the block runs, exclusive unless `shared`; another
    process asking for a conflicting one waits, and is let in if the holder dies. The lock
    files live in this machine's temporary directory, named by the path's digest: a cache
    or a failed build never holds one."""
    digest = hashlib.sha256(str(path.absolute()).encode()).hexdigest()[:24]
    lock = Path(tempfile.gettempdir()) / f"climstack-locks-{os.getuid()}" / f"{path.name}-{digest}"
    lock.parent.mkdir(mode=0o700, exist_ok=True)
    if lock.parent.stat().st_uid != os.getuid():
        raise ClimstackError(
            f"{lock.parent} belongs to another user", fix="remove it, or set TMPDIR elsewhere"
        )
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # as open() would make it, not mkstemp's 0600
        with os.fdopen(fd, "w") as stream:
            stream.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def directory(final: Path, fill, current=None) -> Path:
    """Create `final` by calling fill(temporary sibling) and renaming it. An existing `final`
    is kept while current() says it is up to date (default: always), else swapped for the
    new one; asked again under the lock, so concurrent builders make it once."""

    def up_to_date() -> bool:
        return final.is_dir() and (current is None or current())

    if up_to_date():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with locked(final):
        if up_to_date():  # made while this process waited for the lock
            return final
        work = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
        try:
            work.chmod(0o777 & ~_umask())  # as mkdir would make it, not mkdtemp's 0700
            fill(work)
            if final.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old.", dir=final.parent))
                os.replace(final, old / "x")
                shutil.rmtree(old, ignore_errors=True)
            work.rename(final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return final
