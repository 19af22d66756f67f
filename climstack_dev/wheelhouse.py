"""A wheelhouse made from the project's own .venv, without the network: each distribution
installed there (but the project itself, installed editable) packed back into a wheel from
the files its RECORD lists, as `pip download -r requirements.txt -d DIR` would give them.
The login-node test installs the .venv of a fresh checkout from it with no index
(PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR), in a network namespace with no network."""

import base64
import csv
import hashlib
import io
import os
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

from climstack.common import cache, stamp
from climstack.pins import PROJECT_ROOT, cache_dir

#: RECORD entries pip writes on install, not part of the wheel
INSTALLED_ONLY = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD")


def _record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def _archive_name(dist: metadata.Distribution, site: Path, relative: str) -> str | None:
    """Where an installed file goes in the wheel; None: left out (bytecode, pip's own files,
    console scripts, which pip writes again from entry_points.txt)."""
    path = Path(relative)
    if path.suffix == ".pyc" or "__pycache__" in path.parts:
        return None
    if path.parent.name.endswith(".dist-info") and path.name in INSTALLED_ONLY:
        return None
    if not relative.startswith(".."):
        return relative
    outside = Path(os.path.normpath(site / relative)).relative_to(sys.prefix)
    scripts = {entry.name for entry in dist.entry_points if entry.group.endswith("_scripts")}
    if outside.parts[0] == "bin" and outside.name in scripts:
        return None
    data = Path(dist._path).name.removesuffix(".dist-info") + ".data"  # type: ignore
    if outside.parts[0] == "bin":
        return f"{data}/scripts/{outside.name}"
    return f"{data}/data/{outside}"


def tag_set(wheel_info: Path) -> str:
    """The compressed tag set of a WHEEL file's Tag lines (py2.py3-none-any)."""
    tags = [
        line.split(":", 1)[1].strip().split("-")
        for line in wheel_info.read_text().splitlines()
        if line.startswith("Tag:")
    ]
    return "-".join(".".join(dict.fromkeys(tag[i] for tag in tags)) for i in range(3))


def pack(dist: metadata.Distribution, site: Path, out: Path) -> Path:
    """One installed distribution as a wheel in `out` (stored, not compressed: it is read
    once, on this machine)."""
    info = Path(dist._path)  # type: ignore[attr-defined]
    wheel = out / f"{info.name.removesuffix('.dist-info')}-{tag_set(info / 'WHEEL')}.whl"
    records = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as archive:
        for file in dist.files or []:
            archived = _archive_name(dist, site, str(file))
            if archived is None or not (site / file).is_file():
                continue
            data = (site / file).read_bytes()
            if ".data/scripts/" in archived and data[:2] == b"#!":
                data = b"#!python" + data[data.index(b"\n") :]  # pip writes the interpreter
            archive.writestr(archived, data)
            records.append(_record_line(archived, data))
        listing = io.StringIO()
        record = f"{info.name}/RECORD"
        csv.writer(listing, lineterminator="\n").writerows([*records, [record, "", ""]])
        archive.writestr(record, listing.getvalue())
    return wheel


def from_venv() -> Path:
    """The wheels of what this project's .venv holds (this interpreter's), made once per
    set of requirements (cached in the user cache)."""
    site = Path(sysconfig.get_paths()["purelib"])
    inputs = ((PROJECT_ROOT / n).read_text() for n in ("requirements.txt", "pyproject.toml"))
    entry = cache.Entry(cache_dir() / "wheelhouse", stamp.digest(sys.version, *inputs))

    def fill(work: Path) -> None:
        work.mkdir()
        for dist in metadata.distributions(path=[str(site)]):
            if dist.metadata["Name"] != "climstack":  # the checkout itself, installed -e
                pack(dist, site, work)

    return entry.build(fill)
