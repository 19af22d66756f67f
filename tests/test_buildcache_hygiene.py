"""Fast checks around buildcache sharing: no secret key in git, the site mirrors validate
with Spack's schema and show both shapes, deb-src entries follow the host's apt sources."""

import functools
import shutil
import subprocess

import pytest
import yaml

from climstack import spack
from climstack.errors import ClimstackError
from climstack.pins import PROJECT_ROOT
from climstack.stack import buildcache as bc
from climstack.stack.sources import debian_sources as ds
from climstack.stack import environments, signing
from climstack_dev.centre import tarball_of


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True)


def test_no_secret_key_is_tracked_by_git():
    assert signing.tracked_secret_keys() == [], "secret PGP keys are tracked: remove them from git"


def test_the_secret_key_check_catches_one(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "backup.txt").write_text("-----BEGIN PGP " "PRIVATE KEY BLOCK-----\nxyz\n")
    (tmp_path / "public.pub").write_text("-----BEGIN PGP PUBLIC KEY BLOCK-----\n")
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)
    assert signing.tracked_secret_keys(tmp_path) == ["backup.txt"]


def test_secret_key_exports_are_ignored():
    for name in (
        "keys/secret/climstack.key",
        "climstack.key",
        "keys/centre.sec",
        "keys/secret/backup.asc",
    ):
        assert git("check-ignore", "-q", name).returncode == 0, f"{name} is not git-ignored"
    # the public key is meant to be shared (and may be committed)
    assert git("check-ignore", "-q", "keys/climstack.pub").returncode == 1


#: the site environments (one per site; containers use no site's mirrors)
SITE_ENVS = sorted(n for n in environments.find_environments() if not n.startswith("container-"))


@functools.cache
def site_mirrors(site: str) -> dict:
    """The mirrors Spack merges for the site's environment."""
    env = environments.resolve(site)
    return yaml.safe_load(spack.run("config", "get", "mirrors", env=env).stdout)["mirrors"]


def test_site_mirrors_validate_and_are_what_spack_uses():
    """Each site's mirrors.yaml passes Spack's schema and is the mirrors config Spack merges
    for the site's environment (not shadowed, not left out of the scope)."""
    for site in SITE_ENVS:
        env = environments.resolve(site)
        environments.check(env)
        files = [f for f in environments.check_scope_files(env) if f.name == "mirrors.yaml"]
        assert files, f"site {site} has no mirrors.yaml in its scopes"
        for file in files:
            declared = yaml.safe_load(file.read_text())["mirrors"]
            assert set(declared) <= set(site_mirrors(site)), (site, file)


def test_a_bad_mirror_entry_is_refused_naming_the_file(tmp_path):
    """The control: the same check refuses a mirrors.yaml Spack's schema rejects."""
    site = tmp_path / "site" / "local"
    shutil.copytree(PROJECT_ROOT / "site" / "local", site)
    mirrors = site / "mirrors.yaml"
    text = mirrors.read_text()
    assert "signed: true" in text
    mirrors.write_text(text.replace("signed: true", "signed: perhaps", 1))
    env = tmp_path / "env"
    env.mkdir()
    (env / "spack.yaml").write_text(
        yaml.safe_dump({"spack": {"include": [str(environments.STACK), str(site)]}})
    )
    with pytest.raises(ClimstackError) as error:
        environments.check(env)
    assert str(mirrors) in str(error.value) and "perhaps" in str(error.value)


def test_site_mirrors_show_the_filesystem_and_the_oci_shape():
    urls = [m["url"] for site in SITE_ENVS for m in site_mirrors(site).values()]
    assert any(url.startswith("oci://") for url in urls)
    assert any(url.startswith(("/", "$")) for url in urls)
    for site in SITE_ENVS:  # binaries from shared caches are verified
        caches = [m for m in site_mirrors(site).values() if m.get("source") is False]
        assert caches and all(m["signed"] is True for m in caches), site


def test_deb_src_entries_follow_the_hosts_apt_sources(tmp_path, monkeypatch):
    listing, parts = tmp_path / "sources.list", tmp_path / "sources.list.d"
    parts.mkdir()
    listing.write_text(
        "deb [signed-by=/k.gpg] http://mirror.invalid/debian bookworm main contrib\n"
        "deb-src http://mirror.invalid/debian bookworm main\n"
    )
    (parts / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\nSigned-By: /k.gpg\n\n"
        "Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: bookworm-security\n"
        "Components: main\n"
    )
    monkeypatch.setattr(ds, "APT_SOURCES", (listing, parts))
    written = ds.DebianSources(root=tmp_path / "apt", suites=("trixie",)).write_sources()
    stanzas = [
        dict(line.split(": ", 1) for line in s.splitlines() if ": " in line)
        for s in written.read_text().split("\n\n")
    ]
    assert all(s["Types"] == "deb-src" for s in stanzas) and len(stanzas) == 3
    assert stanzas[0] == {
        "Types": "deb-src",
        "URIs": "http://mirror.invalid/debian",
        "Suites": "bookworm trixie",
        "Components": "main contrib",
        "Signed-By": "/k.gpg",
    }
    assert stanzas[2]["Suites"] == "bookworm-security"  # no trixie on the security archive


def test_mirror_urls_and_the_tarball_layout(tmp_path):
    assert bc.mirror_url(str(tmp_path)) == tmp_path.as_uri()
    assert bc.mirror_url("oci://registry.invalid/x") == "oci://registry.invalid/x"
    manifest = tmp_path / "v3" / "manifests" / "spec" / "zlib" / "zlib-1-abc.spec.manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(
        '-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\n{"version":3,'
        '"data":[{"mediaType":"application/vnd.spack.install.v2.tar+gzip",'
        '"checksum":"ab12"}]}\n-----BEGIN PGP SIGNATURE-----\n'
    )
    assert tarball_of(tmp_path, "zlib") == tmp_path / "blobs" / "sha256" / "ab" / "ab12"
