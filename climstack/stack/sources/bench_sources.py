"""Offline routes to the sources of the local environment's benchmarks, the Spack-native
ones air-gapped centres use. Nothing fetched is committed to this repository.

- **git versions into the source mirror** (mpibench, netcdf-bench, benchio: our recipes pin
  a commit; osu-micro-benchmarks: site/offline requires a public git copy of the 7.4 release,
  because OSU publishes tarballs only on its own site). `spack mirror create` fills the
  site's source mirror; git's `url.<override>.insteadOf` maps each upstream URL to the one
  in CLIMSTACK_<NAME>_GIT, so the tarballs land where Spack looks for the upstream URL.
- **a develop tree** (netcdf-fortran): climstack.stack.sources.develop_trees.
- netcdf-c's archive comes from Debian byte-identical (climstack.stack.sources.source_mirror).
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
- **release tarballs remade from the tag** (adios2, and compiler-wrapper, which every build
  needs): GitHub's archive of a tag is `git archive` of it gzipped by `gzip -n`, so the
  recipe's own version and sha256 serve (GIT_RELEASES); ADIOS2's GitHub patches are made
  as FMS's are.
"""

import json
import os
from pathlib import Path


from climstack.common import atomic, cache, progress, stamp
from climstack.errors import ClimstackError
from climstack.spack import DEFAULT, Spack
from climstack.stack.sources import develop_trees, source_mirror
from climstack.stack.sources.debian_sources import DebianSources
from climstack.stack.sources.git_archives import assemble, place_patch, place_release
from climstack.stack.sources.git_sources import (
    ARCHIVE_SOURCES,
    ASSEMBLED,
    GIT_PATCHES,
    GIT_RELEASES,
    GIT_SOURCES,
    IO_LAYERS,
    SUBMODULE_SOURCES,
    git_environ,
)


def locked(env_dir: Path) -> set[str]:
    """The package names of env_dir's spack.lock; without a lock, the benchmarks of
    GIT_SOURCES every environment holds (the model's and the I/O layers' need its lock)."""
    lock = env_dir / "spack.lock"
    if not lock.is_file():
        return {s.package for s in GIT_SOURCES if s.package not in ASSEMBLED | IO_LAYERS}
    nodes = json.loads(lock.read_text())["concrete_specs"].values()
    return {node["name"] for node in nodes}


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
        if release and need["version"] == release.version and release.serves(url):
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
        sources = (*GIT_SOURCES, *ARCHIVE_SOURCES, *SUBMODULE_SOURCES)
        variables = ", ".join(s.variable for s in sources)
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
        *(source.url for source in (*GIT_SOURCES, *ARCHIVE_SOURCES, *SUBMODULE_SOURCES)),
    )

    def fill_mirror():
        with progress.step(f"filling the source mirror {mirror_dir}"):
            report = source_mirror.fill_from_debian(
                env_dir, mirror_dir, DebianSources(suites=("trixie",))
            )
            fill_git(env_dir, mirror_dir)
        elsewhere = (
            *(s.package for s in (*GIT_SOURCES, *ARCHIVE_SOURCES)),
            develop_trees.NETCDF_FORTRAN.package,
        )
        for spec, outcome in sorted(report.items()):
            if "no Debian source" in outcome and not spec.startswith(elsewhere):
                print(f"source mirror: {spec}: {outcome}")

    # one filler at a time: the image's and the local environment's builds may run side by
    # side (`make local`), and both fill this mirror (apt's state, the same tarballs)
    with atomic.locked(mirror_dir):
        cache.once(mirror_dir / f".filled-{env_dir.name}", inputs, fill_mirror)
