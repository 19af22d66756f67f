"""The archives the offline routes make from git repositories into a source mirror, each
once: a GitHub patch (`git format-patch`), a release tarball (`git archive` of its tag,
gzipped as GitHub does), and a commit with its submodules assembled where Spack looks for a
git version; each checked against the recipe's sha256 where the recipe pins one."""

import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from urllib.parse import unquote

from climstack.common import process, progress
from climstack.errors import ClimstackError
from climstack.stack.sources import source_mirror
from climstack.stack.sources.git_sources import (
    ASSEMBLED,
    COMPILER_WRAPPER,
    SUBMODULE_SOURCES,
    GitPatch,
    GitRelease,
    GitSource,
    _git_url,
    git_environ,
    local_mirror,
    source_of,
)


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
    source = source_of(patch.package)
    env = {**os.environ, **git_environ()}
    with tempfile.TemporaryDirectory() as tmp:
        what = f"fetching {patch.package}'s commit {patch.commit[:12]} for its recipe's patch"
        fix = f"set {source.variable} to a reachable git mirror or a local clone"
        url = _rewritten(_git_url(source.url))
        repo = Path(unquote(url.removeprefix("file://"))) if url.startswith("file://") else tmp
        if repo == tmp:  # a local copy is used in place: a partial one cannot serve a fetch
            process.run(["git", "init", "--quiet", "--bare", tmp], what, env=env)
            # depth 3: GitHub's patch of a merge commit is its newest non-merge commit's,
            # whose parent git needs (a grandparent of the merge)
            fetch = ["git", "-C", tmp, "fetch", "--quiet", "--depth", "3", url, patch.commit]
            process.run(fetch, what, env=env, timeout=600, fix=fix)
        made = Path(tmp) / "made.patch"  # bytes: a patch need not be UTF-8 (MPICH's is not)
        process.run(
            ["git", "-C", str(repo), "format-patch", "-1", f"--output={made}", "--full-index"]
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
    source = source_of(release.package)
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


def place_compiler_wrapper(mirror_dir: Path) -> Path:
    """The compiler wrapper's release at the path Spack looks for it in mirror_dir, before
    any environment is solved: every build, a test's or the smoke slice's too, runs it."""
    release, sha256 = COMPILER_WRAPPER, COMPILER_WRAPPER.sha256
    paths = [
        f"_source-cache/archive/{sha256[:2]}/{sha256}.tar.gz",
        f"{release.package}/{release.package}-{release.version}.tar.gz",
    ]
    return place_release(release, {"sha256": sha256, "paths": paths}, mirror_dir)


def _repository(source: GitSource, tmp: Path) -> Path:
    """A local repository of `source` (its override's directory, a local mirror git's
    `url.<base>.insteadOf` names, used in place: a partial clone's missing blobs are left
    out of the archive, not fetched; or else a bare clone in tmp)."""
    url = _rewritten(_git_url(source.url))
    if url.startswith("file://"):
        return Path(unquote(url.removeprefix("file://")))
    clone = tmp / source.package
    what = f"cloning {url} for {source.package}'s archive"
    fix = f"set {source.variable} to a reachable git mirror or a local clone"
    process.run(["git", "clone", "--bare", "--quiet", url, clone], what, timeout=1800, fix=fix)
    return clone


def _rewritten(url: str) -> str:
    """`url` after git's own `url.<base>.insteadOf` configuration (no network)."""
    env = {**os.environ, **git_environ()}
    what = f"expanding the git URL {url}"
    return process.run(["git", "ls-remote", "--get-url", url], what, env=env).stdout.strip()


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
                fix="add it to SUBMODULE_SOURCES in climstack/stack/sources/git_sources.py",
            )
        gitlink = _git(repo, "ls-tree", commit, path, what=what).split()[2]
        found.append((by_upstream[url], gitlink, path))
    return found


def assemble(package: str, mirror_dir: Path) -> Path:
    """The mirror's archive of `package`'s ASSEMBLED commit, its submodules included,
    where Spack looks for the git version (`_source-cache/git/<owner>/<repo>.git/<commit>
    .tar.gz`), made once."""
    commit = ASSEMBLED[package]
    source = source_of(package)
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
