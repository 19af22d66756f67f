"""climstack.common.versions (packaging.version, tolerant of Cray's versions) orders every
version the site scopes and the tests use exactly as the three hand-written comparisons it
replaced did (cray_pe.version_key, mpich_base.version_tuple, families' compiler order); the
version a site's external spec names is read by Spack's spec parser."""

import functools
import itertools
import re

import pytest
import yaml
from conftest import PROJECT_ROOT
from test_host_trees import CPE_RELEASES, ODD_VERSIONS

from climstack.common import versions
from climstack.cray import mpich_base
from climstack.inputs import sites

SUPPORT = PROJECT_ROOT / "climstack_dev"


def old_version_key(version: str) -> tuple:
    """cray_pe.version_key before packaging."""
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[.\-_]", version))


def old_version_tuple(version: str) -> tuple[int, ...]:
    """mpich_base.version_tuple before packaging."""
    parts = []
    for piece in version.split("."):
        match = re.match(r"\d+", piece)
        if not match:
            break
        parts.append(int(match.group()))
        if match.group() != piece:
            break
    return tuple(parts)


def old_compiler_key(version: str) -> list[int]:
    """families.reflavour's order of compiler directories before packaging."""
    return [int(x) for x in re.findall(r"\d+", version)]


@functools.cache
def used_versions() -> list[str]:
    """The versions of the site scopes (external specs, the CPE release table), of the test
    trees and of the host-tree tests, and the odd Cray versions the issue names."""
    found = set(ODD_VERSIONS) | set(CPE_RELEASES)
    found |= {"8.1.27", "8.1.30", "6.1.12", "23.09", "16.0.1"}  # test_host_trees
    found |= {"2.6.2-2.5_2.22", "1.12.1.2.2.0.0", "9.0.0.113", "8.1.27.4"}
    for path in (PROJECT_ROOT / "site").rglob("*.yaml"):
        found |= set(re.findall(r"@=?(\d[\w.\-]*)", path.read_text()))
    table = yaml.safe_load((PROJECT_ROOT / "site/cray-ex/cpe-releases.yaml").read_text())
    for release, components in table["releases"].items():
        found |= {str(release), *map(str, components.values())}
    for path in SUPPORT.glob("*.py"):  # /opt/cray/.../<version>/ of the synthetic trees
        found |= set(re.findall(r"/(\d[\w.\-]*\d)/", path.read_text()))
    for first, last, base, _ in mpich_base.CRAY_MPICH_BASES:
        found |= {first, last, base}
    return sorted(found)


def sign(a, b) -> int:
    return (a > b) - (a < b)


def test_the_versions_in_use_are_many_and_odd():
    used = used_versions()
    assert len(used) > 80
    assert {"2.6.2-2.5_2.22", "1.12.1.2.2.0.0", "8.1.27.rc1", "default", "25.3"} <= set(used)


def test_every_pair_orders_as_cray_pe_did():
    differ = [
        (a, b)
        for a, b in itertools.combinations(used_versions(), 2)
        if sign(versions.sort_key(a), versions.sort_key(b))
        != sign(old_version_key(a), old_version_key(b))
    ]
    assert not differ


def test_sorting_the_versions_in_use_is_unchanged():
    used = used_versions()
    for order in (used, used[::-1]):  # ties (23.09, 23.9) keep their order, as before
        assert sorted(order, key=versions.sort_key) == sorted(order, key=old_version_key)


def test_release_numbers_are_mpich_bases_as_before():
    assert [versions.release(v) for v in used_versions()] == list(
        map(old_version_tuple, used_versions())
    )


@pytest.mark.parametrize(
    "names", [("9.1", "10.0", "14.0", "8.2"), ("10.3", "9.1", "12.0.1", "default")]
)
def test_compiler_directories_order_as_before(names):
    assert sorted(names, key=versions.sort_key) == sorted(names, key=old_compiler_key)


def test_packaging_reads_what_it_can():
    assert versions.release("3.4a2") == (3, 4)
    assert versions.sort_key("23.09") == versions.sort_key("23.9")  # PEP 440 normalises
    assert versions.sort_key("default") < versions.sort_key("0") < versions.sort_key("0.1")
    assert versions.sort_key("8.1.27") < versions.sort_key("8.1.27.rc1")  # as before


def test_spack_reads_the_version_of_a_spec():
    specs = (
        "cray-mpich@8.1.27 ~wrappers os=sles15",
        "perl@5.26.1~cpanm+shared+threads os=sles15",
        "libfabric@1.12.1.2.2.0.0 os=sles15",
        "xpmem@=2.6.2-2.5_2.22",
        "mpich@3.4:3.4.99",
        "slurm os=sles15",
    )
    assert sites.spec_versions(*specs) == dict(
        zip(specs, ("8.1.27", "5.26.1", "1.12.1.2.2.0.0", "2.6.2-2.5_2.22", None, None))
    )
