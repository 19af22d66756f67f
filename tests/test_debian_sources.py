"""apt's files read with python-debian's deb822: Sources indexes (looked up by sha256) and
the host's deb822 `.sources` entries, comments, disabled entries and embedded keys included."""

import pytest
from debian.deb822 import Deb822

from climstack.stack.sources import debian_sources as ds

ORIG = "a" * 64
DSC = "b" * 64


def stanza(package: str, version: str, sha256: str, name: str, extra: str = "") -> str:
    return (
        f"Package: {package}\nBinary: {package}\nVersion: {version}\n"
        f"Files:\n {'c' * 32} 10 {name}\n{extra}"
        f"Checksums-Sha256:\n {DSC} 20 {package}_{version}.dsc\n {sha256} 10 {name}\n"
        f"Directory: pool/main/{package[0]}/{package}\n"
    )


def test_a_sources_index_maps_each_sha256_to_its_package_version_and_file():
    first = "\n".join(
        [
            stanza("zlib", "1:1.3-1", "d" * 64, "zlib_1.3.orig.tar.gz"),
            stanza("netcdf", "1:4.9.2-5", ORIG, "netcdf_4.9.2.orig.tar.xz"),
        ]
    )
    second = stanza("netcdf", "1:4.9.3-1", ORIG, "netcdf_4.9.3.orig.tar.xz")
    index = ds.SourcesIndex([first, second])
    assert index[ORIG] == ("netcdf", "1:4.9.2-5", "netcdf_4.9.2.orig.tar.xz")  # first wins
    assert DSC in index and "c" * 32 not in index  # only Checksums-Sha256 counts
    assert dict(index) == {
        "d" * 64: ("zlib", "1:1.3-1", "zlib_1.3.orig.tar.gz"),
        DSC: ("zlib", "1:1.3-1", "zlib_1:1.3-1.dsc"),
        ORIG: ("netcdf", "1:4.9.2-5", "netcdf_4.9.2.orig.tar.xz"),
    }
    with pytest.raises(KeyError):
        index["e" * 64]


def test_a_sha256_inside_another_field_is_not_a_file():
    sha512 = f"Checksums-Sha512:\n {'f' * 16}{ORIG}{'f' * 48} 10 x.tar.xz\n"
    index = ds.SourcesIndex([stanza("x", "1", "d" * 64, "x.tar.xz", extra=sha512)])
    assert ORIG not in index and len(index) == 2


def test_host_sources_files_with_comments_disabled_entries_and_embedded_keys(
    tmp_path, monkeypatch
):
    listing, parts = tmp_path / "sources.list", tmp_path / "sources.list.d"
    parts.mkdir()
    listing.write_text("# none here\n")
    key = (
        "\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n mQINBF\n -----END PGP PUBLIC KEY BLOCK-----"
    )
    (parts / "debian.sources").write_text(
        "# Debian\nTypes: deb deb-src\n# the mirror\nURIs: http://mirror.invalid/debian\n"
        f"Suites: bookworm\nComponents: main\nSigned-By:{key}\n\n"
        "Types: deb\nURIs: http://old.invalid/debian\nSuites: buster\nComponents: main\n"
        "Enabled: no\n"
    )
    monkeypatch.setattr(ds, "APT_SOURCES", (listing, parts))
    assert ds.host_deb_entries() == [("http://mirror.invalid/debian", "bookworm", "main", key, "")]
    written = ds.DebianSources(root=tmp_path / "apt").write_sources()
    assert written.read_text().startswith("# written by climstack source-mirror\nTypes: deb-src\n")
    (entry,) = Deb822.iter_paragraphs(written.read_text().splitlines())
    assert entry["Signed-By"] == key and entry["URIs"] == "http://mirror.invalid/debian"
