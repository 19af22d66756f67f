"""Source mirrors for air-gapped centres.

`create` is Spack's own `spack mirror create` for an environment. `fill_from_debian` fills
a mirror from Debian source packages, but only with an orig tarball whose sha256 equals the
one the Spack recipe pins: Spack still verifies every checksum when it fetches from the
mirror. Debian's Sources indexes list each file's sha256, so matching needs no download.
apt runs with its own state under cache_dir()/debian-src (no root, /etc/apt untouched);
the deb-src entries are derived from the host's own `deb` entries (same mirror and keys).
"""

import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from climstack.build import environments
from climstack.common import process
from climstack.config import spack
from climstack.errors import ClimstackError
from climstack.pins import cache_dir

APT_SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
ONE_LINE = re.compile(r"^deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)(.*)$", re.MULTILINE)

# Run inside `spack -e ENV python`: one JSON object per concrete spec that Spack would
# fetch, with its pinned sha256 and its paths in a mirror (digest path first, then alias).
_NEEDS = r"""
import json, os
import spack.environment as ev, spack.fetch_strategy as fs, spack.mirrors.layout as layout
out = []
for spec in ev.active_environment().all_specs():
    if spec.external or not spec.package.has_code:
        continue
    fetcher = spec.package.fetcher
    entry = {"spec": spec.format("{name}@{version}/{hash:7}"), "name": spec.name,
             "version": str(spec.version), "hash": spec.dag_hash(),
             "url": getattr(fetcher, "url", None), "sha256": None, "paths": []}
    if isinstance(fetcher, fs.URLFetchStrategy) and len(fetcher.digest or "") == 64:  # sha256
        entry["sha256"] = fetcher.digest
        alias = os.path.join(spec.name, spec.format_path("{name}-{version}"))
        entry["paths"] = list(layout.default_mirror_layout(fetcher, alias, spec))
    out.append(entry)
    for patch in spec.patches:  # patches fetched from a URL need the mirror too
        if getattr(patch, "url", None):
            ref = os.path.join(patch.owner.split(".")[-1], os.path.basename(patch.url))
            out.append({"spec": f"{entry['spec']} patch {patch.url}", "name": spec.name,
                        "version": entry["version"], "hash": entry["hash"], "url": patch.url,
                        "sha256": patch.archive_sha256 or patch.sha256,
                        "paths": list(layout.default_mirror_layout(patch.fetcher(), ref))})
print(json.dumps(out))
"""


def needed_sources(env_dir: Path, run=spack.run) -> list[dict]:
    """What the (concretized) environment fetches: name, version, sha256, mirror paths."""
    with tempfile.NamedTemporaryFile("w", suffix=".py") as script:
        script.write(_NEEDS)
        script.flush()
        proc = run("python", script.name, env=env_dir)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def create(env_dir: Path, mirror_dir: Path, run=spack.run) -> str:
    """`spack mirror create --all` for the environment (fetches through configured mirrors)."""
    mirror_dir.mkdir(parents=True, exist_ok=True)
    proc = run("mirror", "create", "-d", str(mirror_dir), "--all", env=env_dir, check=False)
    if proc.returncode != 0:
        raise ClimstackError(
            f"`spack mirror create -d {mirror_dir}` for {env_dir} failed:\n"
            f"{(proc.stderr or proc.stdout).strip()}",
            fix="sources that cannot be downloaded here must come from another mirror: "
            f"`climstack source-mirror fill-debian {env_dir} {mirror_dir}`, or copy them "
            "in from a connected machine",
        )
    return proc.stdout


class DebianSources:
    """apt with private state, reading deb-src indexes for the host's Debian mirror."""

    def __init__(self, root: Path | None = None, suites: tuple[str, ...] = ()):
        self.root = root or cache_dir() / "debian-src"
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
            entries.append("\n".join(f"{key}: {value}" for key, value in fields.items()))
        if not entries:
            raise ClimstackError(
                f"no `deb` entries in {' or '.join(map(str, APT_SOURCES))}",
                fix="configure the Debian archive (or a mirror of it) in apt",
            )
        self.sources_file.parent.mkdir(parents=True, exist_ok=True)
        self.sources_file.write_text(
            "# written by climstack source-mirror\n" + "\n\n".join(entries) + "\n"
        )
        for sub in ("lists/partial", "cache/archives/partial"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        return self.sources_file

    def update(self) -> None:
        self.write_sources()
        self._apt("update")

    def index(self) -> dict[str, tuple[str, str, str]]:
        """sha256 -> (source package, version, file name), over every Sources index."""
        files = self._apt("indextargets", "--format", "$(FILENAME)", "Identifier: Sources").split()
        found: dict[str, tuple[str, str, str]] = {}
        for name in files:
            text = process.run(
                ["/usr/lib/apt/apt-helper", "cat-file", name], f"reading the apt index {name}"
            ).stdout
            for stanza in text.split("\n\n"):
                package = version = None
                in_sums = False
                for line in stanza.splitlines():
                    if line.startswith("Package: "):
                        package = line[9:]
                    elif line.startswith("Version: "):
                        version = line[9:]
                    elif not line.startswith(" "):
                        in_sums = line.startswith("Checksums-Sha256:")
                    elif in_sums:
                        sha, _size, filename = line.split()
                        found.setdefault(sha, (package, version, filename))
        return found

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
        target = into / filename
        # apt's messages in English whatever the user's locale: the check below reads them
        proc = process.run(
            [
                "/usr/lib/apt/apt-helper",
                *self._options(),
                "download-file",
                uris[0],
                target,
                f"SHA256:{sha256}",
            ],
            f"downloading {uris[0]}",
            timeout=1800,
            check=False,
            env=process.environ(LC_ALL="C.UTF-8", LANGUAGE=None),
        )
        if "Hash Sum mismatch" in proc.stdout + proc.stderr:
            raise ClimstackError(
                f"{uris[0]} ({package} {version}) does not have the sha256 "
                f"{sha256} that its Sources index and Spack's recipe give; "
                "nothing was added to the mirror",
                fix="re-run to download again; if it persists, the Debian "
                "mirror is corrupt: use another. Never disable Spack's checksums",
            )
        if proc.returncode != 0:
            raise ClimstackError(
                f"downloading {uris[0]} failed (exit {proc.returncode}):\n"
                + (proc.stderr or proc.stdout).strip()[-2000:],
                fix="check that the Debian mirror is reachable",
            )
        return target


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
            for stanza in text.split("\n\n"):
                fields = dict(
                    line.split(":", 1)
                    for line in stanza.splitlines()
                    if ":" in line and not line.startswith(("#", " "))
                )
                fields = {k.strip(): v.strip() for k, v in fields.items()}
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
    run=spack.run,
) -> dict[str, str]:
    """Fill mirror_dir with every source of the environment that Debian ships byte-identical.

    Returns spec -> what happened: "present", "added from <debian file>", or why not.
    """
    debian = debian or DebianSources()
    if update or not (debian.root / "lists").is_dir():
        debian.update()
    index = debian.index()
    report = {}
    for need in needed_sources(env_dir, run):
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
        if need["sha256"] not in index:
            report[need["spec"]] = f"no Debian source file has sha256 {need['sha256']}"
            continue
        package, version, filename = index[need["sha256"]]
        with tempfile.TemporaryDirectory() as tmp:
            tarball = debian.download(package, version, filename, need["sha256"], Path(tmp))
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


def register(commands) -> None:
    def run_create(args):
        print(create(*checked(args.environment, args.mirror)), end="")

    def run_fill(args):
        debian = DebianSources(suites=tuple(args.suite))
        report = fill_from_debian(*checked(args.environment, args.mirror), debian)
        for spec, outcome in sorted(report.items()):
            print(f"{spec}: {outcome}")
        print(f"deb-src entries: {debian.sources_file}")

    sub = commands.add_parser("source-mirror", help="air-gapped source mirrors for an environment")
    actions = sub.add_subparsers(dest="action", required=True)
    create_cmd = actions.add_parser(
        "create", help="`spack mirror create --all` for an environment"
    )
    fill_cmd = actions.add_parser(
        "fill-debian",
        help="fill a mirror from Debian source packages "
        "whose orig tarball has the recipe's sha256",
    )
    fill_cmd.add_argument(
        "--suite",
        action="append",
        default=[],
        help="extra Debian suite to search (e.g. trixie); repeatable",
    )
    for action, run in ((create_cmd, run_create), (fill_cmd, run_fill)):
        action.add_argument("environment", help="environment name or directory (concretized)")
        action.add_argument("mirror", help="mirror directory")
        action.set_defaults(run=run)
