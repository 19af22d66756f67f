"""The local environment really installs its smoke slice and runs it on Debian's MPICH.
Each test stands alone: the install is a fixture (Spack skips what is installed)."""

from pathlib import Path

import pytest

from climstack import spack
from climstack.bind import elf
from climstack.check import smoke
from climstack.stack import environments


@pytest.fixture(scope="module")
def installed(concretized) -> Path:
    """The local environment concretized and its probes installed; mpi-probe's prefix."""
    concretized("local")
    return smoke.install(environments.resolve("local"))


def test_local_smoke_slice_runs_on_debian_mpich(installed):
    output = smoke.run_probe(installed, ranks=2)
    assert "library: MPICH Version:\t4.0.2" in output
    assert "ranks: 2" in output
    assert "libmpich.so.12" in output  # the loaded file, from dladdr


def test_xpmem_stub_is_an_empty_library_named_libxpmem_so_0(installed):
    prefix = spack.run("location", "-i", "xpmem-stub", env=environments.resolve("local"))
    library = Path(prefix.stdout.strip()) / "lib" / "libxpmem.so.0"
    stub = elf.read(library)
    assert stub.soname == "libxpmem.so.0"
    assert not [s for s in stub.exports if not s.startswith("_")]  # only DT_NEEDED matters
