"""The local environment really installs its smoke slice and runs it on Debian's MPICH."""

from pathlib import Path

from elftools.elf.elffile import ELFFile

from climstack import environments, image_check, smoke, spack


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
    assert image_check.read_elf(library).soname == "libxpmem.so.0"
    with open(library, "rb") as stream:
        functions = [s.name for s in ELFFile(stream).get_section_by_name(".dynsym").iter_symbols()
                     if s["st_shndx"] != "SHN_UNDEF" and s["st_info"]["type"] == "STT_FUNC"]
    assert functions == []  # nothing to call: only its DT_NEEDED entry matters
