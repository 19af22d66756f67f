"""Offline routes to the sources of the local environment's benchmarks, the Spack-native
ones air-gapped centres use. Nothing fetched is committed to this repository.

- **git versions into the source mirror** (mpibench, netcdf-bench, benchio: our recipes pin
  a commit; osu-micro-benchmarks: site/offline requires a public git copy of the 7.4 release,
  because OSU publishes tarballs only on its own site). `spack mirror create` fills the
  site's source mirror; git's `url.<override>.insteadOf` maps each upstream URL to the one
  in CLIMSTACK_<NAME>_GIT, so the tarballs land where Spack looks for the upstream URL.
- **a develop tree** (netcdf-fortran): climstack.stack.develop_trees.
- netcdf-c's archive comes from Debian byte-identical (climstack.stack.source_mirror).
- the model, MOM6: its recipe pins a commit with submodules (CVMix-src, GSW-Fortran).
  `spack mirror create` would clone each in full (`git submodule update` through the same
  insteadOf overrides, CLIMSTACK_CVMIX_SRC_GIT and CLIMSTACK_GSW_FORTRAN_GIT); instead the
  archive is assembled where Spack looks for it (ASSEMBLED) with `git archive` of the
  commit and of each submodule at its gitlink, so a partial copy of a repository (only
  the pinned commits' trees) serves too: a file whose blob it lacks (GSW-Fortran's test
  data, which MOM6 never reads) is left out and named. FMS 2023.03 is a git version
  (site/offline requires its tag's commit), assembled the same way, and the patch its
  recipe downloads from GitHub is made from the FMS repository (`git format-patch
  --no-signature` writes GitHub's .patch byte for byte) into the mirror.
- **release tarballs remade from the tag** (adios2): GitHub's archive of a tag is `git
  archive` of it gzipped by `gzip -n`, so the recipe's own version and sha256 serve
  (GIT_RELEASES); its GitHub patches are made as FMS's are.
"""

import json
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote


from climstack import pins
from climstack.common import atomic, cache, process, progress, stamp
from climstack.errors import ClimstackError
from climstack.spack import DEFAULT, Spack
from climstack.stack import develop_trees, source_mirror
from climstack.stack.debian_sources import DebianSources


@dataclass(frozen=True)
class GitSource:
    package: str
    upstream: str  # the recipe's (or site/offline's package_attributes) git URL

    @property
    def variable(self) -> str:
        return "CLIMSTACK_" + self.package.upper().replace("-", "_") + "_GIT"

    @property
    def url(self) -> str:
        return os.environ.get(self.variable) or self.upstream


GIT_SOURCES = (
    GitSource("mpibench", "https://github.com/LLNL/mpiBench.git"),
    GitSource("netcdf-bench", "https://github.com/joobog/netcdf-bench.git"),
    GitSource("benchio", "https://github.com/EPCCed/benchio.git"),
    GitSource(
        "osu-micro-benchmarks", "https://github.com/sherrywong1220/osu-micro-benchmarks-7.4.git"
    ),
    GitSource("mom6", "https://github.com/NOAA-GFDL/MOM6.git"),
    GitSource("fms", "https://github.com/NOAA-GFDL/FMS.git"),
    GitSource("benchio-adios2", "https://github.com/davidhenty/benchio.git"),
    GitSource("adios2", "https://github.com/ornladios/ADIOS2.git"),
)
#: git versions whose archive is assembled (`git archive`, submodules included) rather
#: than cloned in full by `spack mirror create`: MOM6's recipe pin and the FMS 2023.03
#: commit site/offline requires
ASSEMBLED = {
    "mom6": "df2cd1265006eb2e98cd9471a8f77c6d8a1c1135",
    "fms": "527a42f3ff36d75aac68b65757b35f73a74146bb",
}
#: the I/O layers' sources (environments/stack.yaml `io_layers`), which only the Cray
#: sites' environments and the image hold
IO_LAYERS = {"adios2", "benchio-adios2"}
#: repositories cloned as submodules of a git version above (MOM6's pkg/), by their name:
#: not packages, only their URLs are overridden
SUBMODULE_SOURCES = (
    GitSource("cvmix-src", "https://github.com/mom-ocean/CVMix-src.git"),
    GitSource("gsw-fortran", "https://github.com/mom-ocean/GSW-Fortran.git"),
)


@dataclass(frozen=True)
class GitPatch:
    """A recipe's patch downloaded from GitHub's `<commit>.patch?full_index=1`, made from
    the package's git repository instead, and checked against the recipe's sha256."""

    package: str  # whose GitSource has the commit
    commit: str
    sha256: str

    def mirror_path(self, mirror_dir: Path) -> Path:
        """Where Spack looks in a source mirror for a patch of this sha256 (its
        `_source-cache/archive/<2>/<sha256>`; a patch is not expanded, so no extension)."""
        return mirror_dir / "_source-cache" / "archive" / self.sha256[:2] / self.sha256


GIT_PATCHES = (
    # fms@2023.03: "Update CMakeLists.txt - append extra flags for gnu 10+ with mpich"
    GitPatch(
        "fms",
        "c9bba516ba1115d4a7660fba92f9d67cf3fd32ad",
        "07d5b68838bba61ee547bd4cd7c12d81228c91a80a966b8693694fa236d0ac30",
    ),
    # adios2@2.8:2.10: "Fix issue with GCC 7" (ADIOS2 PR 4591)
    GitPatch(
        "adios2",
        "b7a5957a15e5458f6e3650a01a88d73950f6c161",
        "d854008ab27d6ebfa66fffb78126b17713cda3234ed19bf331f85a720e599a32",
    ),
    # adios2@2.8: (ADIOS2 PR 4578)
    GitPatch(
        "adios2",
        "e7e8785f428597c02a010b428d54bf159b051031",
        "5b56f4beb5f0580ee7b8f5240048676827cc9fb9760ea742ab237dc1a0b94f91",
    ),
)


@dataclass(frozen=True)
class GitRelease:
    """A release the recipe downloads as GitHub's archive of its tag, remade from the
    package's git repository: `git archive` of the tag gzipped by `gzip -n` is that archive
    byte for byte, so the recipe's version and sha256 serve unchanged."""

    package: str  # whose GitSource has the tag
    version: str
    tag: str
    prefix: str  # the archive's top directory


GIT_RELEASES = (GitRelease("adios2", "2.10.2", "v2.10.2", "ADIOS2-2.10.2/"),)


def _git_url(url: str) -> str:
    """A local clone's path as a file:// URL; anything else as given."""
    return Path(url).resolve().as_uri() if "://" not in url and Path(url).exists() else url


def git_environ() -> dict:
    """git configuration (through the environment) mapping each upstream URL overridden
    by its CLIMSTACK_<NAME>_GIT to the override."""
    sources = (*GIT_SOURCES, *SUBMODULE_SOURCES)
    overrides = [(s.url, s.upstream) for s in sources if s.url != s.upstream]
    env = {"GIT_CONFIG_COUNT": str(len(overrides)), "GIT_TERMINAL_PROMPT": "0"}
    for index, (url, upstream) in enumerate(overrides):
        url = _git_url(url)
        env[f"GIT_CONFIG_KEY_{index}"] = f"url.{url}.insteadOf"
        env[f"GIT_CONFIG_VALUE_{index}"] = upstream
    return env


def _copied_from_site_mirror(final: Path, mirror_dir: Path) -> bool:
    """Copy the file at final's place in the site's source mirror (local_mirror) to final,
    as `spack mirror create` fetches through the configured mirrors: no git needed."""
    kept = local_mirror() / final.relative_to(mirror_dir)
    if kept.resolve() == final.resolve() or not kept.is_file():
        return False
    final.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(kept, final)
    return True


def place_patch(patch: GitPatch, mirror_dir: Path) -> Path:
    """The patch, made from its package's git repository, in mirror_dir (once)."""
    final = patch.mirror_path(mirror_dir)
    if final.is_file() or _copied_from_site_mirror(final, mirror_dir):
        return final
    source = next(s for s in GIT_SOURCES if s.package == patch.package)
    env = {**os.environ, **git_environ()}
    with tempfile.TemporaryDirectory() as tmp:
        what = f"fetching {patch.package}'s commit {patch.commit[:12]} for its recipe's patch"
        fix = f"set {source.variable} to a reachable git mirror or a local clone"
        process.run(["git", "init", "--quiet", "--bare", tmp], what, env=env)
        url = _git_url(source.url)
        # depth 3: GitHub's patch of a merge commit is its newest non-merge commit's, whose
        # parent git needs (a grandparent of the merge)
        fetch = ["git", "-C", tmp, "fetch", "--quiet", "--depth", "3", url, patch.commit]
        process.run(fetch, what, env=env, timeout=600, fix=fix)
        made = Path(tmp) / "made.patch"  # bytes: a patch need not be UTF-8 (MPICH's is not)
        process.run(
            ["git", "-C", tmp, "format-patch", "-1", f"--output={made}", "--full-index"]
            + ["--no-signature", patch.commit],
            what,
            env=env,
        )
        if source_mirror.sha256sum(made) != patch.sha256:
            raise ClimstackError(
                f"the patch made from {patch.package}'s commit {patch.commit} does not have "
                f"the recipe's sha256 {patch.sha256}",
                fix=f"point {source.variable} at a faithful copy of {source.upstream}",
            )
        final.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(made, final.with_name(f".{final.name}.partial"))
        os.replace(final.with_name(f".{final.name}.partial"), final)
    return final


def place_release(release: GitRelease, need: dict, mirror_dir: Path) -> Path:
    """The release's archive, remade from its tag, at its paths in mirror_dir (once);
    `need`: its entry of source_mirror.needed_sources (sha256, mirror paths)."""
    final = mirror_dir / need["paths"][0]
    if final.is_file() or _copied_from_site_mirror(final, mirror_dir):
        return final
    source = next(s for s in GIT_SOURCES if s.package == release.package)
    fix = f"point {source.variable} at a faithful copy of {source.upstream}"
    with tempfile.TemporaryDirectory() as tmp:
        repo = _repository(source, Path(tmp))
        tar = Path(tmp) / "release.tar"
        _git(repo, "archive", "--format=tar", f"--output={tar}", f"--prefix={release.prefix}",
             release.tag, what=f"archiving {release.package}'s tag {release.tag}")  # fmt: skip
        process.run(["gzip", "-n", str(tar)], f"compressing {tar.name}")
        made = tar.with_name(tar.name + ".gz")
        if source_mirror.sha256sum(made) != need["sha256"]:
            raise ClimstackError(
                f"the archive made from {release.package}'s tag {release.tag} does not have "
                f"the recipe's sha256 {need['sha256']}",
                fix=fix,
            )
        source_mirror.store(mirror_dir, need["paths"], made)
    return final


def locked(env_dir: Path) -> set[str]:
    """The package names of env_dir's spack.lock; without a lock, the benchmarks of
    GIT_SOURCES every environment holds (the model's and the I/O layers' need its lock)."""
    lock = env_dir / "spack.lock"
    if not lock.is_file():
        return {s.package for s in GIT_SOURCES if s.package not in ASSEMBLED | IO_LAYERS}
    nodes = json.loads(lock.read_text())["concrete_specs"].values()
    return {node["name"] for node in nodes}


def _repository(source: GitSource, tmp: Path) -> Path:
    """A local repository of `source` (its override's directory, or a bare clone in tmp)."""
    url = _git_url(source.url)
    if url.startswith("file://"):
        return Path(unquote(url.removeprefix("file://")))
    clone = tmp / source.package
    what = f"cloning {url} for {source.package}'s archive"
    fix = f"set {source.variable} to a reachable git mirror or a local clone"
    process.run(["git", "clone", "--bare", "--quiet", url, clone], what, timeout=1800, fix=fix)
    return clone


def _git(repo: Path, *args: str, what: str) -> str:
    env = {**os.environ, **git_environ()}
    return process.run(["git", "-C", repo, *args], what, env=env).stdout


def _archive_tree(repo: Path, commit: str, prefix: str, out: Path) -> list[str]:
    """`git archive` of commit into the tar `out` under prefix; the paths of blobs the
    repository lacks are left out and returned."""
    what = f"archiving {repo} at {commit[:12]}"
    objects = _git(repo, "rev-list", "--objects", "--missing=print", "-n1", commit, what=what)
    absent = {line[1:] for line in objects.splitlines() if line.startswith("?")}
    listing = _git(repo, "ls-tree", "-r", "--full-tree", commit, what=what).splitlines()
    missing = [line.split("\t", 1)[1] for line in listing if line.split()[2] in absent]
    exclude = [f":(exclude,literal){path}" for path in missing]
    _git(repo, "archive", f"--output={out}", f"--prefix={prefix}", commit, "--", ".",
         *exclude, what=what)  # fmt: skip
    return missing


def _submodules(repo: Path, commit: str, package: str) -> list[tuple[GitSource, str, str]]:
    """(source, gitlink commit, path) of each submodule of repo at commit."""
    what = f"reading {package}'s submodules at {commit[:12]}"
    if not _git(repo, "ls-tree", "--name-only", commit, ".gitmodules", what=what).strip():
        return []
    listed = _git(repo, "config", "--blob", f"{commit}:.gitmodules", "--list", what=what)
    config = dict(line.split("=", 1) for line in listed.splitlines())
    by_upstream = {s.upstream.removesuffix(".git"): s for s in SUBMODULE_SOURCES}
    found = []
    for key, path in config.items():
        if not key.endswith(".path"):
            continue
        url = config[key.removesuffix(".path") + ".url"].removesuffix(".git")
        if url not in by_upstream:
            raise ClimstackError(
                f"{package}'s submodule {path} ({url}) has no offline route",
                fix="add it to SUBMODULE_SOURCES in climstack/stack/bench_sources.py",
            )
        gitlink = _git(repo, "ls-tree", commit, path, what=what).split()[2]
        found.append((by_upstream[url], gitlink, path))
    return found


def assemble(package: str, mirror_dir: Path) -> Path:
    """The mirror's archive of `package`'s ASSEMBLED commit, its submodules included,
    where Spack looks for the git version (`_source-cache/git/<owner>/<repo>.git/<commit>
    .tar.gz`), made once."""
    commit = ASSEMBLED[package]
    source = next(s for s in GIT_SOURCES if s.package == package)
    owner_repo = source.upstream.removeprefix("https://github.com/")
    final = mirror_dir / "_source-cache" / "git" / owner_repo / f"{commit}.tar.gz"
    if final.is_file() or _copied_from_site_mirror(final, mirror_dir):
        return final
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        repo = _repository(source, tmp)
        parts = [(repo, commit, f"{package}/")]
        for module, gitlink, path in _submodules(repo, commit, package):
            parts.append((_repository(module, tmp), gitlink, f"{package}/{path}/"))
        final.parent.mkdir(parents=True, exist_ok=True)
        partial = final.parent / f".{final.name}.{os.getpid()}"
        with tarfile.open(partial, "w:gz") as archive:
            for index, (where, at, prefix) in enumerate(parts):
                piece = tmp / f"{index}.tar"
                for path in _archive_tree(where, at, prefix, piece):
                    progress.note(f"{package}'s archive: {prefix}{path} left out ({where} "
                                  "lacks its blob)")  # fmt: skip
                with tarfile.open(piece) as tar:
                    for member in tar:
                        data = tar.extractfile(member) if member.isfile() else None
                        archive.addfile(member, data)
        os.replace(partial, final)
    return final


def fill_git(env_dir: Path, mirror_dir: Path, names=None, spack: Spack = DEFAULT) -> str:
    """`spack mirror create` of the git-versioned benchmarks (or those `names`) of env_dir
    into mirror_dir, with the patches of GIT_PATCHES their recipes download. By default
    those of GIT_SOURCES the environment's lock holds (`spack mirror create` would
    concretize one it lacks on its own, e.g. FMS at a version only GitHub has)."""
    held = locked(env_dir)
    releases = {r.package: r for r in GIT_RELEASES}
    names = names or [s.package for s in GIT_SOURCES if s.package in held]
    for patch in GIT_PATCHES:
        if patch.package in names or patch.package in held:
            place_patch(patch, mirror_dir)
    wanted = [r for r in GIT_RELEASES if r.package in names or r.package in held]
    for need in source_mirror.needed_sources(env_dir, spack) if wanted else []:
        release = releases.get(need["name"])
        url = need["url"] or ""
        if (
            release
            and need["version"] == release.version
            and url.endswith(f"/{release.tag}.tar.gz")
        ):
            place_release(release, need, mirror_dir)
    names = [name for name in names if name not in releases]  # not git versions
    if not names:  # no git version: `spack mirror create` would mirror every spec
        return ""
    for package in (name for name in names if name in ASSEMBLED):
        assemble(package, mirror_dir)
    env = {**os.environ, **git_environ()}
    try:
        result = spack.run(
            "mirror",
            "create",
            "-d",
            str(mirror_dir),
            *names,
            env=env_dir,
            environ=env,
        )
    except ClimstackError as err:
        variables = ", ".join(s.variable for s in (*GIT_SOURCES, *SUBMODULE_SOURCES))
        raise ClimstackError(
            f"cannot fill {mirror_dir} from the benchmarks' git repositories: "
            f"{err.message.strip().splitlines()[-1]}",
            fix=f"set {variables} to reachable git mirrors or local clones",
        ) from err
    return result.stdout


def fill(env_dir: Path, mirror_dir: Path) -> None:
    """Every source of the environment Spack cannot download here, once per input."""
    inputs = stamp.digest(
        (env_dir / "spack.lock").read_text(),
        *(source.url for source in (*GIT_SOURCES, *SUBMODULE_SOURCES)),
    )

    def fill_mirror():
        with progress.step(f"filling the source mirror {mirror_dir}"):
            report = source_mirror.fill_from_debian(
                env_dir, mirror_dir, DebianSources(suites=("trixie",))
            )
            fill_git(env_dir, mirror_dir)
        elsewhere = (*(s.package for s in GIT_SOURCES), develop_trees.NETCDF_FORTRAN.package)
        for spec, outcome in sorted(report.items()):
            if "no Debian source" in outcome and not spec.startswith(elsewhere):
                print(f"source mirror: {spec}: {outcome}")

    # one filler at a time: the image's and the local environment's builds may run side by
    # side (`make local`), and both fill this mirror (apt's state, the same tarballs)
    with atomic.locked(mirror_dir):
        cache.once(mirror_dir / f".filled-{env_dir.name}", inputs, fill_mirror)


def local_mirror() -> Path:
    """The source mirror of site/offline (`sources`: $user_cache_path/../source-mirror)."""
    return pins.spack_user_cache().parent / "source-mirror"
