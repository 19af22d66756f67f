"""Input stamps: a digest of everything a cached result was made from, so that the result
is reused exactly while its inputs are unchanged."""

import hashlib
from pathlib import Path

from climstack.pins import PROJECT_ROOT


def digest(*inputs: str | bytes | Path, length: int = 16) -> str:
    """sha256 over strings and files (directories recursively, by name and content)."""
    hasher = hashlib.sha256()
    for item in inputs:
        if isinstance(item, Path):
            files = sorted(p for p in item.rglob("*") if p.is_file()) if item.is_dir() else [item]
            for file in files:
                if "__pycache__" in file.parts:
                    continue
                name = (
                    file.relative_to(PROJECT_ROOT) if file.is_relative_to(PROJECT_ROOT) else file
                )
                hasher.update(f"\0{name}\0".encode() + file.read_bytes())
        else:
            hasher.update(b"\0" + (item if isinstance(item, bytes) else item.encode()))
    return hasher.hexdigest()[:length]


def tree(root: Path, length: int = 16) -> str:
    """sha256 of a directory's files by their names below it: the same content anywhere."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return digest(
        *(f"{f.relative_to(root)}\0".encode() + f.read_bytes() for f in files), length=length
    )


def current(stamp_file: Path, value: str) -> bool:
    """Whether `stamp_file` records `value` (the cached result beside it is up to date)."""
    return stamp_file.is_file() and stamp_file.read_text().strip() == value
