"""Source mirrors for air-gapped centres.

`create` is Spack's own `spack mirror create` for an environment. `fill_from_debian` fills
a mirror from Debian source packages, but only with an orig tarball whose sha256 equals the
one the Spack recipe pins: Spack still verifies every checksum when it fetches from the
mirror. The Debian side (apt, its indexes, the downloads) is
climstack.stack.sources.debian_sources.
"""

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from climstack.errors import ClimstackError
from climstack.spack import DEFAULT, Spack
from climstack.stack import environments
from climstack.stack.sources.debian_sources import DebianSources


def needed_sources(env_dir: Path, spack: Spack = DEFAULT) -> list[dict]:
    """What the (concretized) environment fetches: name, version, sha256, mirror paths."""
    return spack.python("needed_sources.py", env=env_dir)


def create(env_dir: Path, mirror_dir: Path, spack: Spack = DEFAULT) -> str:
    """`spack mirror create --all` for the environment (fetches through configured mirrors)."""
    mirror_dir.mkdir(parents=True, exist_ok=True)
    proc = spack.run("mirror", "create", "-d", str(mirror_dir), "--all", env=env_dir, check=False)
    if proc.returncode != 0:
        raise ClimstackError(
            f"`spack mirror create -d {mirror_dir}` for {env_dir} failed:\n"
            f"{(proc.stderr or proc.stdout).strip()}",
            fix="sources that cannot be downloaded here must come from another mirror: "
            f"`climstack source-mirror fill-debian {env_dir} {mirror_dir}`, or copy them "
            "in from a connected machine",
        )
    return proc.stdout


def sha256sum(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def store(mirror_dir: Path, paths: list[str], tarball: Path) -> Path:
    """Place a tarball at its digest path in a mirror and link the human-readable alias."""
    target = mirror_dir / paths[0]
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tarball, target)
    for alias in paths[1:]:
        link = mirror_dir / alias
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(os.path.relpath(target, link.parent))
    return target


def fill_from_debian(
    env_dir: Path,
    mirror_dir: Path,
    debian: DebianSources | None = None,
    update: bool = True,
    spack: Spack = DEFAULT,
) -> dict[str, str]:
    """Fill mirror_dir with every source of the environment that Debian ships byte-identical.

    Returns spec -> what happened: "present", "added from <debian file>", or why not.
    Debian's index is read (and updated) only when a source is not present already.
    """
    debian = debian or DebianSources()
    index = None
    report = {}
    for need in needed_sources(env_dir, spack):
        if (need["url"] or "").startswith("file:"):
            report[need["spec"]] = "local file, nothing to mirror"
            continue
        if not need["sha256"]:
            report[need["spec"]] = f"skipped: not a sha256-pinned archive ({need['url']})"
            continue
        target = mirror_dir / need["paths"][0]
        if target.is_file() and sha256sum(target) == need["sha256"]:
            report[need["spec"]] = "present"
            continue
        if index is None:
            if update or not (debian.root / "lists").is_dir():
                debian.update()
            index = debian.index()
        if need["sha256"] not in index:
            report[need["spec"]] = f"no Debian source file has sha256 {need['sha256']}"
            continue
        package, version, filename = index[need["sha256"]]
        with tempfile.TemporaryDirectory() as tmp:
            download = debian.download(package, version, filename, need["sha256"], Path(tmp))
            # apt's file may be a link into the archive: hash and store one private copy
            tarball = Path(tmp) / "checked" / filename
            tarball.parent.mkdir()
            shutil.copyfile(download, tarball)
            actual = sha256sum(tarball)
            if actual != need["sha256"]:  # the index lied or the download is corrupt
                raise ClimstackError(
                    f"Debian's {filename} ({package} {version}) has sha256 {actual}, "
                    f"its Sources index and Spack's {need['spec']} say {need['sha256']}",
                    fix="re-run to download again; never disable Spack's checksums",
                )
            store(mirror_dir, need["paths"], tarball)
        report[need["spec"]] = f"added from Debian {package} {version} ({filename})"
    return report


def checked(environment: str, mirror: str) -> tuple[Path, Path]:
    """The environment (concretized: an unconcretized one would mirror nothing, silently)
    and the mirror directory (a directory or not there yet)."""
    env_dir, mirror_dir = environments.resolve(environment), Path(mirror).resolve()
    if not (env_dir / "spack.lock").is_file():
        raise ClimstackError(
            f"{env_dir} is not concretized (no spack.lock): there is nothing " "to mirror yet",
            fix=f"`climstack concretize {environment}` first",
        )
    if mirror_dir.exists() and not mirror_dir.is_dir():
        raise ClimstackError(
            f"mirror {mirror_dir} is a file, not a directory",
            fix="give a directory (it is created when missing)",
        )
    return env_dir, mirror_dir
