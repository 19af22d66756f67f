"""The local environment really installs its smoke slice and runs it on Debian's MPICH."""

from pathlib import Path

from climstack.build import environments, smoke
from climstack.config import spack
from climstack.run import elf


def test_local_smoke_slice_runs_on_debian_mpich(concretized):
    concretized("local")
    prefix = smoke.install(environments.resolve("local"))
    output = smoke.run_probe(prefix, ranks=2)
    assert "library: MPICH Version:\t4.0.2" in output
    assert "ranks: 2" in output
    assert "libmpich.so.12" in output  # the loaded file, from dladdr


def test_xpmem_stub_is_an_empty_library_named_libxpmem_so_0(concretized):
    concretized("local")
    prefix = spack.run("location", "-i", "xpmem-stub", env=environments.resolve("local"))
    library = Path(prefix.stdout.strip()) / "lib" / "libxpmem.so.0"
    stub = elf.read(library)
    assert stub.soname == "libxpmem.so.0"
    assert not [s for s in stub.exports if not s.startswith("_")]  # only DT_NEEDED matters
