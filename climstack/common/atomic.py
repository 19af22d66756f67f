"""Write files and directories so that a reader sees the old version or the complete new
one, never half: fill a temporary sibling, then rename it into place."""

import os
import shutil
import tempfile
from pathlib import Path


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as stream:
            stream.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def directory(final: Path, fill, replace: bool = False) -> Path:
    """Create `final` by calling fill(temporary sibling) and renaming it. An existing
    `final` is kept, unless `replace`, when it is swapped for the new one."""
    if final.is_dir() and not replace:
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        fill(work)
        if replace and final.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old.", dir=final.parent))
            os.replace(final, old / "x")
            shutil.rmtree(old, ignore_errors=True)
        try:
            work.rename(final)
        except OSError:
            if not final.is_dir():  # another process won the race: theirs is as good
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final
