"""Each Cray site scope pins one CPE release: its component versions all ship together
(site/cray-ex/cpe-releases.yaml, from LUMI's published tables of HPE's releases)."""

import pytest

from climstack.cray import cray_pe
from climstack.cray.drift import pinned_modules
from climstack.inputs import sites
from climstack_dev.cpe_tree import cray_sites

CRAY_SITES = cray_sites()


def test_the_cray_sites_are_found():
    assert {"archer2"} <= set(CRAY_SITES) and "local" not in CRAY_SITES


@pytest.mark.parametrize("site", CRAY_SITES)
def test_a_cray_site_pins_one_cpe_release(site):
    pinned = pinned_modules(sites.get(site))
    assert {"cray-mpich", "cray-pmi", "cce"} <= set(pinned), pinned
    releases = cray_pe.releases_of(pinned)
    assert cray_pe.common_release(pinned), f"site {site} mixes CPE releases: {releases}"


def test_a_scope_that_mixes_releases_is_caught():
    # what site/gaea pinned before the split: cce 19.0.0 (25.03) with hdf5 1.14.3.7 (25.09)
    mixed = {"cce": "19.0.0", "cray-mpich": "8.1.32", "cray-hdf5-parallel": "1.14.3.7"}
    assert cray_pe.common_release(mixed) == []
    assert cray_pe.releases_of(mixed)["cray-hdf5-parallel/1.14.3.7"] == ["25.09"]
    assert cray_pe.common_release({**mixed, "cray-hdf5-parallel": "1.14.3.5"}) == ["25.03"]


def test_archer2_is_cpe_23_09():
    assert cray_pe.common_release(pinned_modules(sites.get("archer2"))) == ["23.09"]
