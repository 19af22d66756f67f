"""fill-debian's two checksum refusals, driven for real: a Spack recipe pins an orig
tarball's sha256, a local Debian archive (file:, Sources index by dpkg-scansources, the
host's only apt source) ships it, and apt downloads it. The control fills the mirror; a
tarball corrupted in the archive, or changed after apt checked it, adds nothing."""

import gzip
import hashlib
import io
import subprocess
import tarfile

import pytest
import yaml

from climstack import pins
from climstack.errors import ClimstackError
from climstack.stack.sources import debian_sources as ds
from climstack.stack.sources import git_archives, git_sources
from climstack.stack import lock_cache
from climstack.stack.sources import source_mirror as sm

PACKAGE, VERSION = "climstack-fake", "1.0-1"
ORIG = f"{PACKAGE}_1.0.orig.tar.gz"
RECIPE = '''from spack.package import *


class ClimstackFake(Package):
    """Pins the orig tarball that the test's Debian archive ships."""

    homepage = "https://climstack.invalid"
    url = "https://climstack.invalid/climstack-fake-1.0.tar.gz"

    version("1.0", sha256="{sha256}")

    def install(self, spec, prefix):
        pass
'''


def orig_tarball() -> bytes:
    """The same bytes every run (gzip's mtime fixed): the recipe, hence its concretization,
    is the same, and lock_cache reuses it."""
    data = b"climstack source-mirror test\n"
    info = tarfile.TarInfo(f"{PACKAGE}-1.0/README")
    info.size = len(data)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as compressed:
        with tarfile.open(fileobj=compressed, mode="w") as tar:
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    """A concretized environment of one package whose recipe pins the tarball's sha256."""
    home = tmp_path_factory.mktemp("recipe")
    tarball = orig_tarball()
    sha256 = hashlib.sha256(tarball).hexdigest()
    package = home / "repo" / "packages" / PACKAGE / "package.py"
    package.parent.mkdir(parents=True)
    package.write_text(RECIPE.format(sha256=sha256))
    (home / "repo" / "repo.yaml").write_text("repo:\n  namespace: climstack_fake\n  api: v1.0\n")
    env = home / "env"
    env.mkdir()
    manifest = {"repos": {"fake": str(home / "repo")}, "specs": [PACKAGE], "view": False}
    (env / "spack.yaml").write_text(yaml.safe_dump({"spack": manifest}))
    lock_cache.concretize(env)
    return env, tarball, sha256


@pytest.fixture
def archive(recipe, tmp_path, monkeypatch):
    """A trusted, unsigned file: archive shipping the tarball, as the host's only apt source;
    returns the tarball's path in it."""
    tarball = recipe[1]
    root = tmp_path / "archive"
    pool = root / "pool" / "main" / "c" / PACKAGE
    pool.mkdir(parents=True)
    (pool / ORIG).write_bytes(tarball)
    sums = {
        algorithm: f" {hashlib.new(algorithm, tarball).hexdigest()} {len(tarball)} {ORIG}"
        for algorithm in ("sha256", "md5")
    }
    (pool / f"{PACKAGE}_{VERSION}.dsc").write_text(
        f"Format: 3.0 (quilt)\nSource: {PACKAGE}\nBinary: {PACKAGE}\nArchitecture: all\n"
        f"Version: {VERSION}\nMaintainer: climstack <test@climstack.invalid>\n"
        f"Checksums-Sha256:\n{sums['sha256']}\nFiles:\n{sums['md5']}\n"
    )
    scan = subprocess.run(["dpkg-scansources", "pool"], cwd=root, capture_output=True, text=True)
    assert scan.returncode == 0 and ORIG in scan.stdout, scan.stderr
    (root / "dists" / "stable" / "main" / "source").mkdir(parents=True)
    (root / "dists" / "stable" / "main" / "source" / "Sources").write_text(scan.stdout)
    etc = tmp_path / "etc"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list").write_text(f"deb [trusted=yes] {root.as_uri()} stable main\n")
    monkeypatch.setattr(ds, "APT_SOURCES", (etc / "sources.list", etc / "sources.list.d"))
    return pool / ORIG


class ChangedAfterApt(ds.DebianSources):
    """The tarball changes after apt verified it and before climstack hashes it: apt links a
    file: download into the archive, so a mirror re-synced meanwhile does just that."""

    def __init__(self, root, changed: bytes):
        super().__init__(root)
        self.changed = changed

    def download(self, *args, **kwargs):
        target = super().download(*args, **kwargs)
        target.write_bytes(self.changed)
        return target


def test_fill_debian_adds_the_archives_tarball_with_the_recipes_sha256(
    recipe, archive, tmp_path, monkeypatch
):
    env, tarball, _ = recipe
    report = sm.fill_from_debian(env, tmp_path / "mirror", ds.DebianSources(tmp_path / "apt"))
    need = sm.needed_sources(env)[0]
    assert report == {need["spec"]: f"added from Debian {PACKAGE} {VERSION} ({ORIG})"}
    assert (tmp_path / "mirror" / need["paths"][0]).read_bytes() == tarball
    # filled again, the tarball is present: Debian's index is neither updated nor read
    for step in ("update", "index"):
        monkeypatch.setattr(ds.DebianSources, step, lambda self: pytest.fail("Debian index"))
    again = sm.fill_from_debian(env, tmp_path / "mirror", ds.DebianSources(tmp_path / "apt"))
    assert again == {need["spec"]: "present"}


@pytest.mark.parametrize("language", ["", "de"])
def test_a_corrupt_tarball_in_the_archive_is_refused_by_apts_hash_check(
    recipe, archive, tmp_path, monkeypatch, language
):
    """A byte of the tarball changed after the Sources index was made: apt reports "Hash Sum
    mismatch", in English also for a user whose apt speaks German."""
    env, tarball, sha256 = recipe
    monkeypatch.setenv("LANGUAGE", language)
    archive.write_bytes(tarball[:-1] + bytes([tarball[-1] ^ 1]))  # same size
    with pytest.raises(ClimstackError) as refusal:
        sm.fill_from_debian(env, tmp_path / "mirror", ds.DebianSources(tmp_path / "apt"))
    message = refusal.value.message
    assert f"{archive} ({PACKAGE} {VERSION}) does not have the sha256 {sha256}" in message
    assert "never disable spack's checksums" in refusal.value.fix.lower()
    assert not (tmp_path / "mirror").exists()


def test_a_tarball_changed_after_apts_check_is_refused(recipe, archive, tmp_path):
    env, tarball, sha256 = recipe
    changed = tarball + b"\0"
    debian = ChangedAfterApt(tmp_path / "apt", changed)
    with pytest.raises(ClimstackError) as refusal:
        sm.fill_from_debian(env, tmp_path / "mirror", debian)
    message = refusal.value.message
    actual = hashlib.sha256(changed).hexdigest()
    assert f"Debian's {ORIG} ({PACKAGE} {VERSION}) has sha256 {actual}," in message
    assert message.endswith(f" say {sha256}"), message
    assert "never disable spack's checksums" in refusal.value.fix.lower()
    assert not (tmp_path / "mirror").exists()


def test_the_compiler_wrapper_every_build_runs_is_in_the_mirror_with_the_recipes_sha256():
    """bin/setup placed builtin's compiler-wrapper release (a GitHub asset since
    spack-packages 2026), remade from its tag, where Spack looks for it offline."""
    release = git_sources.COMPILER_WRAPPER
    recipe = pins.builtin_repo_root() / "packages" / "compiler_wrapper" / "package.py"
    assert f'version("{release.version}", sha256="{release.sha256}")' in recipe.read_text()
    placed = git_sources.local_mirror() / "_source-cache" / "archive" / release.sha256[:2]
    assert sm.sha256sum(placed / f"{release.sha256}.tar.gz") == release.sha256


def test_an_archive_remade_from_another_history_is_refused(tmp_path, monkeypatch):
    """Negative control: the wrapper's files committed afresh and tagged v1.1.0 make another
    archive (git archive records the commit): refused by the recipe's sha256, nothing kept."""
    release = git_sources.COMPILER_WRAPPER
    placed = git_sources.local_mirror() / "_source-cache" / "archive" / release.sha256[:2]
    repo = tmp_path / "compiler-wrapper"
    with tarfile.open(placed / f"{release.sha256}.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    (tmp_path / release.prefix.rstrip("/")).rename(repo)
    git = ["git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", repo], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "afresh"], check=True)
    subprocess.run([*git, "tag", release.tag], check=True)
    monkeypatch.setenv(git_sources.source_of(release.package).variable, str(repo))
    monkeypatch.setattr(git_archives, "local_mirror", lambda: tmp_path / "no-site-mirror")
    with pytest.raises(
        ClimstackError, match=f"does not have the recipe's sha256 {release.sha256}"
    ):
        git_archives.place_compiler_wrapper(tmp_path / "mirror")
    assert not list((tmp_path / "mirror").rglob("*.tar.gz"))
