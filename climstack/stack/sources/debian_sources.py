"""Debian source packages through apt: the files a source mirror is filled from.

apt runs with its own state under cache_dir()/debian-src/SUITES (no root, /etc/apt untouched);
the deb-src entries are derived from the host's own `deb` entries (same mirror and keys).
Debian's Sources indexes list each file's sha256, so matching a Spack recipe's checksum
needs no download (climstack.stack.sources.source_mirror does the matching). Indexes and deb822
`.sources` files are read and written with python-debian's deb822; the one-line
`sources.list` format, which python-debian does not read, by ONE_LINE.
"""

import functools
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from debian.deb822 import Deb822, Sources

from climstack.common import process
from climstack.errors import ClimstackError
from climstack.pins import cache_dir

APT_SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
ONE_LINE = re.compile(r"^deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)(.*)$", re.MULTILINE)


class DebianSources:
    """apt with private state, reading deb-src indexes for the host's Debian mirror."""

    def __init__(self, root: Path | None = None, suites: tuple[str, ...] = ()):
        # one apt state per set of extra suites: side by side (`make local`'s three builds),
        # one instance's sources would otherwise overwrite another's between its update and
        # its `apt-get source` (a trixie version then not found)
        self.root = root or cache_dir() / "debian-src" / ("+".join(suites) or "host")
        self.extra_suites = suites
        self.sources_file = self.root / "sources.list.d" / "climstack-deb-src.sources"

    def _options(self) -> list[str]:
        options = {
            "Dir::Etc::SourceList": "/dev/null",
            "Dir::Etc::SourceParts": str(self.sources_file.parent),
            "Dir::State::Lists": str(self.root / "lists"),
            "Dir::Cache": str(self.root / "cache"),
        }
        if os.geteuid() == 0:  # root: download as root rather than as the _apt sandbox user
            options["APT::Sandbox::User"] = "root"
        return [arg for key, value in options.items() for arg in ("-o", f"{key}={value}")]

    def _apt(self, *args: str, cwd: Path | None = None) -> str:
        if not shutil.which("apt-get"):
            raise ClimstackError(
                "no apt-get on this machine",
                fix="fill the source mirror on a Debian/Ubuntu machine",
            )
        return process.run(
            ["apt-get", *self._options(), *args],
            f"`apt-get {' '.join(args)}` (sources {self.sources_file})",
            cwd=cwd,
            timeout=600,
            fix="check that the Debian mirror in the host's apt " "sources is reachable",
        ).stdout

    def write_sources(self) -> Path:
        """deb-src entries for every `deb` entry of the host's apt sources."""
        entries = []
        for uris, suites, components, signed_by, trusted in host_deb_entries():
            suites = suites.split()
            if any("-" not in suite for suite in suites):  # the main archive, not -security
                suites = list(dict.fromkeys(suites + list(self.extra_suites)))
            fields = {
                "Types": "deb-src",
                "URIs": uris,
                "Suites": " ".join(suites),
                "Components": components,
            }
            if signed_by:
                fields["Signed-By"] = signed_by
            if trusted:  # a local, unsigned archive the host already trusts
                fields["Trusted"] = trusted
            entries.append(Deb822(fields).dump())
        if not entries:
            raise ClimstackError(
                f"no `deb` entries in {' or '.join(map(str, APT_SOURCES))}",
                fix="configure the Debian archive (or a mirror of it) in apt",
            )
        self.sources_file.parent.mkdir(parents=True, exist_ok=True)
        self.sources_file.write_text("# written by climstack source-mirror\n" + "\n".join(entries))
        for sub in ("lists/partial", "cache/archives/partial"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        return self.sources_file

    def update(self) -> None:
        self.write_sources()
        self._apt("update")

    def index(self) -> "SourcesIndex":
        """sha256 -> (source package, version, file name), over every Sources index."""
        files = self._apt("indextargets", "--format", "$(FILENAME)", "Identifier: Sources").split()
        return SourcesIndex(
            [
                process.run(
                    ["/usr/lib/apt/apt-helper", "cat-file", name], f"reading the apt index {name}"
                ).stdout
                for name in files
            ]
        )

    def download(self, package: str, version: str, filename: str, sha256: str, into: Path) -> Path:
        """One file of a source package: `apt-get source --print-uris PACKAGE=VERSION` says
        where, apt-helper fetches it checking its sha256. (A whole `apt-get source
        --download-only` fails when the archive has dropped a superseded .dsc but kept the
        orig tarball, as it has for netcdf 4.9.3-1.)"""
        listing = self._apt("source", "--print-uris", f"{package}={version}")
        uris = [
            line.split()[0].strip("'")
            for line in listing.splitlines()
            if line.startswith("'") and line.split()[1:2] == [filename]
        ]
        if not uris:
            raise ClimstackError(
                f"`apt-get source --print-uris {package}={version}` lists no "
                f"{filename} (sources {self.sources_file})",
                fix="run `apt-get update` with those sources again",
            )
        return self._fetch(uris[0], into / filename, sha256, f"{package} {version}")

    def download_binary(self, pool_path: str, sha256: str, into: Path) -> Path:
        """A binary package from the pool of the host's Debian archive (every suite's
        packages live in the one pool), checked against `sha256`; no index is read."""
        archive = next(
            (
                uris.split()[0]
                for uris, suites, *_ in host_deb_entries()
                if any("-" not in suite for suite in suites.split())
            ),
            None,
        )
        if not archive:
            raise ClimstackError(
                f"no main Debian archive among the `deb` entries of {APT_SOURCES[0]} or "
                f"{APT_SOURCES[1]}",
                fix="configure the Debian archive (or a mirror of it) in apt",
            )
        uri = f"{archive.rstrip('/')}/{pool_path}"
        self.write_sources()  # apt-helper's state directories
        return self._fetch(uri, into / Path(pool_path).name, sha256, Path(pool_path).name)

    def _fetch(self, uri: str, target: Path, sha256: str, what: str) -> Path:
        """apt-helper's download of `uri` to `target`, refused unless it has `sha256`."""
        # apt's messages in English whatever the user's locale: the check below reads them
        proc = process.run(
            [
                "/usr/lib/apt/apt-helper",
                *self._options(),
                "download-file",
                uri,
                target,
                f"SHA256:{sha256}",
            ],
            f"downloading {uri}",
            timeout=1800,
            check=False,
            env=process.environ(LC_ALL="C.UTF-8", LANGUAGE=None),
        )
        if "Hash Sum mismatch" in proc.stdout + proc.stderr:
            raise ClimstackError(
                f"{uri} ({what}) does not have the sha256 {sha256} that its index and our "
                "pin give; nothing was kept",
                fix="re-run to download again; if it persists, the Debian "
                "mirror is corrupt: use another. Never disable Spack's checksums",
            )
        if proc.returncode != 0:
            raise ClimstackError(
                f"downloading {uri} failed (exit {proc.returncode}):\n"
                + (proc.stderr or proc.stdout).strip()[-2000:],
                fix="check that the Debian mirror is reachable",
            )
        return target


class SourcesIndex(Mapping):
    """sha256 -> (source package, version, file name) of the Checksums-Sha256 of Sources
    indexes (the first index naming it wins), read by deb822. A lookup parses only the
    stanzas whose text holds the sha256: deb822 takes half a minute over all of Debian's."""

    def __init__(self, texts: list[str]):
        self.texts = texts

    def __getitem__(self, sha256: str) -> tuple[str, str, str]:
        for text in self.texts:
            at = text.find(sha256) if sha256 else -1
            while at >= 0:
                start, end = text.rfind("\n\n", 0, at) + 1, text.find("\n\n", at)
                end = len(text) if end < 0 else end
                found = _checksums(text[start:end]).get(sha256)
                if found:
                    return found
                at = text.find(sha256, end)
        raise KeyError(sha256)

    @functools.cached_property
    def _all(self) -> dict[str, tuple[str, str, str]]:
        found: dict[str, tuple[str, str, str]] = {}
        for text in self.texts:
            for sha256, entry in _checksums(text).items():
                found.setdefault(sha256, entry)
        return found

    def __iter__(self):
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)


def _checksums(text: str) -> dict[str, tuple[str, str, str]]:
    """sha256 -> (source package, version, file name) of the stanzas of a Sources index."""
    found: dict[str, tuple[str, str, str]] = {}
    for source in Sources.iter_paragraphs(text.splitlines(), use_apt_pkg=False):
        for file in source.get("Checksums-Sha256") or []:
            entry = (source.get("Package"), source.get("Version"), file["name"])
            found.setdefault(file["sha256"], entry)
    return found


def host_deb_entries() -> list[tuple[str, str, str, str, str]]:
    """(URIs, Suites, Components, Signed-By, Trusted) of each `deb` entry in the host's apt
    sources."""
    entries = []
    files = (
        [APT_SOURCES[0]]
        + sorted(APT_SOURCES[1].glob("*.list"))
        + sorted(APT_SOURCES[1].glob("*.sources"))
    )
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text()
        if path.suffix == ".sources":
            for fields in Deb822.iter_paragraphs(text.splitlines()):
                enabled = fields.get("Enabled", "yes") != "no"
                if "deb" in fields.get("Types", "").split() and enabled:
                    entries.append(
                        (
                            fields.get("URIs", ""),
                            fields.get("Suites", ""),
                            fields.get("Components", ""),
                            fields.get("Signed-By", ""),
                            fields.get("Trusted", ""),
                        )
                    )
        else:  # one-line format: deb [options] uri suite components...
            for match in ONE_LINE.finditer(text):
                options, uri, suite, components = match.groups()
                signed = re.search(r"signed-by=(\S+)", options or "")
                trusted = re.search(r"trusted=(\S+)", options or "")
                entries.append(
                    (
                        uri,
                        suite,
                        components.strip(),
                        signed[1] if signed else "",
                        trusted[1] if trusted else "",
                    )
                )
    return entries
