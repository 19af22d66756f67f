"""Versioned symbols: an import that names a version binds only to a definition of that
version (or a global one), not to the first object that defines the name. Checked against
the real ld.so's own account of its bindings (LD_DEBUG=bindings). Before this, the model
bound MPI_Send@V2 to the first library in load order, which defines only MPI_Send@V1."""

import os
import re
import shutil
import subprocess

import pytest

from climstack.bind import elf, loader, symbols

pytestmark = pytest.mark.skipif(
    not all(map(shutil.which, ("gcc", "patchelf"))), reason="needs gcc and patchelf"
)


def built(tmp_path):
    """libv1.so (MPI_Send@V1), libv2.so (MPI_Send@@V2), and a program linked against
    libv2 alone, then given libv1 as its first DT_NEEDED (so libv1 comes first in scope)."""
    (tmp_path / "lib.c").write_text("int MPI_Send(void) { return VERSION; }\n")
    (tmp_path / "main.c").write_text(
        "int MPI_Send(void);\nint main(void) { return MPI_Send(); }\n"
    )
    for version in ("1", "2"):
        script = tmp_path / f"v{version}.map"
        script.write_text(f"V{version} {{ global: MPI_Send; local: *; }};\n")
        subprocess.run(
            ["gcc", "-shared", "-fPIC", f"-DVERSION={version}", f"-Wl,--version-script={script}",
             f"-Wl,-soname,libv{version}.so", "-o", str(tmp_path / f"libv{version}.so"),
             str(tmp_path / "lib.c")],
            check=True,
        )  # fmt: skip
    program = tmp_path / "prog"
    subprocess.run(
        ["gcc", "-o", str(program), str(tmp_path / "main.c"), f"-L{tmp_path}", "-lv2",
         f"-Wl,-rpath,{tmp_path}"],
        check=True,
    )  # fmt: skip
    subprocess.run(["patchelf", "--add-needed", "libv1.so", str(program)], check=True)
    return program


def test_a_versioned_import_binds_to_its_version_as_ld_so_does(tmp_path):
    program = built(tmp_path)
    info = elf.read(program)
    assert info.import_versions["MPI_Send"] == "V2"
    assert info.needed.index("libv1.so") < info.needed.index("libv2.so")
    closure = loader.closure(str(program), loader.View())
    assert [o.path.name for o in closure.objects[1:3]] == ["libv1.so", "libv2.so"]
    ours = symbols.bindings(closure, lambda s: s == "MPI_Send")["MPI_Send"].provider
    real = subprocess.run(
        [str(program)], capture_output=True, text=True, env={**os.environ, "LD_DEBUG": "bindings"}
    )
    assert real.returncode == 2  # libv2's MPI_Send ran
    bound = re.search(r"binding file \S*prog \[0\] to (\S+) \[0\]: normal symbol `MPI_Send'",
                      real.stderr)  # fmt: skip
    assert bound and bound[1] == str(ours.path), real.stderr
    assert ours.path.name == "libv2.so"


def test_without_versions_the_first_definition_would_win(tmp_path, monkeypatch):
    """The negative control: the rule removed (any definition of the name), the model binds
    to libv1, which ld.so never does."""
    program = built(tmp_path)
    monkeypatch.setattr(
        elf.Elf, "defines", lambda self, symbol, version="": symbol in self.exports
    )
    closure = loader.closure(str(program), loader.View())
    wrong = symbols.bindings(closure, lambda s: s == "MPI_Send")["MPI_Send"].provider
    assert wrong.path.name == "libv1.so"
