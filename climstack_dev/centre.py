"""An isolated Spack instance ("centre": a climstack.spack.Spack of its own) and the slice of
the local environment that the buildcache round-trip test and benchmark share between two
centres."""

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from climstack.common import atomic, stamp
from climstack.errors import ClimstackError
from climstack.pins import PROJECT_ROOT, cache_dir, spack_user_cache
from climstack.spack import DEFAULT, Spack
from climstack.stack import buildcache as bc
from climstack.stack.sources import debian_sources as ds
from climstack.stack import environments, lock_cache, signing
from climstack.stack.sources import git_archives, git_sources
from climstack.stack.sources import source_mirror as sm

#: the probes plus netcdf-c 4.9.3: Debian's orig tarball (trixie) is Spack's, byte for
#: byte, and its recipe's CVE patch is made from git (git_sources.GIT_PATCHES).
#: ~szip ~blosc ~zstd: those libraries' Debian tarballs are repacked.
SLICE_SPECS = (*environments.definition("probes"), "netcdf-c@4.9.3 +mpi ~szip ~blosc ~zstd")
#: Debian suites searched for the slice's sources besides the host's own
SLICE_SUITES = ("trixie",)
#: where centre A of the tests keeps its keyring, install tree and caches
DEMO = cache_dir() / "buildcache-demo"


@dataclass
class Centre(Spack):
    """An isolated Spack instance: its own user config scope, user cache, keyring, and
    (unless an environment's site scope says otherwise) install root, all set by variables."""

    home: Path
    install_root: Path | None = None
    #: what site/local finds beside $user_cache_path, linked to this machine's: the host's
    #: build tools, and for the whole local environment its develop trees and source mirror
    shared: tuple[str, ...] = ("local-externals",)

    def __post_init__(self):
        self.variables = {
            "SPACK_DISABLE_LOCAL_CONFIG": None,
            "SPACK_USER_CONFIG_PATH": str(self.home / "config"),
            "SPACK_SYSTEM_CONFIG_PATH": str(self.home / "system"),  # empty: no /etc/spack
            "SPACK_USER_CACHE_PATH": str(self.home / "cache"),
            "SPACK_GNUPGHOME": str(self.home / "gpg"),
        }

    def setup(self) -> "Centre":
        (self.home / "config").mkdir(parents=True, exist_ok=True)
        (self.home / "system").mkdir(exist_ok=True)
        for name in self.shared:
            link, target = self.home / name, cache_dir() / name
            if not link.exists() and target.is_dir():
                link.symlink_to(target)
        config = {
            "source_cache": str(self.home / "cache" / "source"),
            # the repo index derives from the pinned repos only: share it (saves ~100 s)
            "misc_cache": str(spack_user_cache() / "cache"),
            "build_jobs": 2,
        }
        if self.install_root:
            config["install_tree"] = {"root": str(self.install_root), "padded_length": 128}
        (self.home / "config" / "config.yaml").write_text(yaml.safe_dump({"config": config}))
        return self


def slice_env(env_dir: Path, specs=SLICE_SPECS, spack: Spack = DEFAULT) -> Path:
    """A slice of the local environment (same stack and site scope), concretized (reused
    while its inputs are unchanged: climstack.stack.lock_cache). The host's zlib is an
    external: Debian repacks zlib's tarball."""
    env_dir.mkdir(parents=True, exist_ok=True)
    manifest = {
        "spack": {
            "include": [str(environments.STACK), str(PROJECT_ROOT / "site" / "local")],
            "specs": [{"matrix": [list(specs), ["$site_arch"]]}],
            "view": False,
        }
    }
    text = yaml.safe_dump(manifest, sort_keys=False)
    written = env_dir / ".manifest"  # what spack.yaml was made from (external find adds zlib)
    if not stamp.current(written, text.strip()):
        (env_dir / "spack.yaml").write_text(text)
        spack.run("external", "find", "--not-buildable", "zlib", env=env_dir)
        written.write_text(text)
    lock_cache.concretize(env_dir, spack=spack)
    return env_dir


def fill_slice_mirror(env: Path, mirror: Path, spack: Spack) -> dict:
    """The slice's sources in `mirror`: Debian's byte-identical archives, then what no Debian
    archive carries, made from git (or copied from this machine's source mirror): Spack's
    compiler wrapper and NetCDF-C's patch. Returns fill_from_debian's report."""
    report = sm.fill_from_debian(env, mirror, ds.DebianSources(suites=SLICE_SUITES), spack=spack)
    git_archives.place_compiler_wrapper(mirror)
    for patch in (p for p in git_sources.GIT_PATCHES if p.package == "netcdf-c"):
        git_archives.place_patch(patch, mirror)
    return report


def centre_a():
    """Centre A of the buildcache tests: its key, the slice built from the Debian-filled
    source mirror and pushed signed to a file:// cache, all kept under DEMO (only the first
    run builds); returns (centre, env, cache url, public key, source-mirror report)."""
    with atomic.locked(DEMO / "centre-a"):  # the tests' processes build it once
        a = Centre(DEMO / "centre-a").setup()
        public = a.home / "centre-a.pub"
        if not signing.gpg_fingerprints(a):
            signing.gpg_create("climstack centre A", "centre-a@climstack.invalid", public, spack=a)
        if not public.is_file():
            signing.gpg_export(public, spack=a)
        env = a.home / "slice"
        slice_env(env, spack=a)
        report = fill_slice_mirror(env, a.home / "source-mirror", spack=a)
        a.run("install", "-j2", env=env, timeout=5400)
        roots = sorted(r["hash"] for r in json.loads((env / "spack.lock").read_text())["roots"])
        cache = DEMO / "caches" / stamp.digest(" ".join(roots))
        bc.push(env, cache.as_uri(), spack=a)
        return a, env, cache.as_uri(), public, report


def tarball_of(cache_dir: Path, name: str) -> Path:
    """The binary tarball of package `name` in a filesystem buildcache (layout v3: a signed
    manifest per spec lists its blobs by sha256)."""
    specs = cache_dir / "v3" / "manifests" / "spec" / name
    manifests = sorted(specs.glob("*.spec.manifest.json"))
    if not manifests:
        raise ClimstackError(
            f"no {name} in buildcache {cache_dir}",
            fix="push it first (`climstack buildcache push`)",
        )
    text = manifests[0].read_text()
    body = text[text.index("{") : text.rindex("}") + 1]  # inside the clearsigned envelope
    blob = next(b for b in json.loads(body)["data"] if "install" in b["mediaType"])
    return cache_dir / "blobs" / "sha256" / blob["checksum"][:2] / blob["checksum"]
