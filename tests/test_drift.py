"""`climstack drift`: the archer2 scope against synthetic Cray PE trees of CPE 23.09 and 25.03
(real ELF libraries, Tcl modulefiles, .version files and CPE modulerc files)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT, run_spack

from climstack.__main__ import main
from climstack.cray import cray_pe
from climstack.cray.drift import pinned_modules
from climstack.inputs import sites
from climstack_dev.cpe_tree import cpe_tree

CLI = str(PROJECT_ROOT / "bin" / "climstack")


def drift(*args) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, "drift", *map(str, args)], capture_output=True, text=True)


def line_of(output: str, package: str) -> str:
    return next(line for line in output.splitlines() if line.split()[:1] == [package])


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("pe")
    nine = [("cray-mpich", "9.0.1")]
    return {
        "23.09": cpe_tree(base / "old"),
        "25.03": cpe_tree(base / "new", ("23.09", "25.03"), "25.03", also=nine),
        "9.0": cpe_tree(
            base / "nine", ("23.09", "25.03"), "25.03", also=nine, defaults={"cray-mpich": "9.0.1"}
        ),
        # ARCHER2's containerised CPE 25.09 (ccpe/25.09), its successor's likely release
        "25.09": cpe_tree(base / "ccpe", ("23.09", "25.09"), "25.09"),
        # Frontier's and Setonix's CPE 26.03, with 25.09 still installed
        "26.03": cpe_tree(base / "cpe26", ("25.09", "26.03"), "26.03"),
        "26.03 not yet default": cpe_tree(base / "cpe25", ("25.09", "26.03"), "25.09"),
    }


@pytest.fixture
def site_copy(tmp_path) -> Path:
    """site/archer2 and the scope it includes, copied (a project with no environments)."""
    for name in ("archer2", "cray-ex"):
        shutil.copytree(PROJECT_ROOT / "site" / name, tmp_path / "site" / name)
    return tmp_path / "site" / "archer2"


def test_archer2_against_its_own_release_is_clean(trees):
    proc = drift("archer2", "--root", trees["23.09"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 of 10 Cray PE externals drifted" in proc.stdout
    assert line_of(proc.stdout, "cray-mpich").endswith(" ok")


def test_a_newer_default_release_is_drift(trees):
    proc = drift("archer2", "--root", trees["25.03"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    mpich = line_of(proc.stdout, "cray-mpich")
    assert "default changed: 8.1.27 -> 8.1.32" in mpich
    assert "newer installed, not default: 9.0.1" in mpich
    assert "default changed: 16.0.1 -> 19.0.0" in line_of(proc.stdout, "cce")
    assert line_of(proc.stdout, "xpmem").endswith(" ok")  # /opt/cray/xpmem/default: no version
    assert "consequence" not in proc.stdout  # 8.1.32 has the same ANL base as 8.1.27


def test_removed_prefix_and_module_are_named(trees, tmp_path):
    root = tmp_path / "pe"
    shutil.copytree(trees["23.09"], root, symlinks=True)
    shutil.rmtree(root / "opt/cray/pe/pmi/6.1.12")
    (root / "opt/cray/pe/modulefiles/cray-pmi/6.1.12").unlink()
    proc = drift("archer2", "--root", root)
    assert proc.returncode == 1
    pmi = line_of(proc.stdout, "cray-pmi")
    assert "prefix missing: /opt/cray/pe/pmi/6.1.12" in pmi
    assert "module missing: cray-pmi/6.1.12" in pmi


def test_a_cray_mpich_9_default_moves_the_container_pin_and_the_proposal_concretizes(
    trees, tmp_path, concretized
):
    concretized("archer2"), concretized("container-archer2")  # the DAGs before
    patch = tmp_path / "update.diff"
    proc = drift("archer2", "--root", trees["9.0"], "--write", patch)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ANL MPICH base 3.4a2 -> 4.1.2: the container's MPICH pin moves from 3.4 to 4.1" in (
        proc.stdout
    )
    text = patch.read_text()
    assert "+    - spec: cray-mpich@9.0.1 ~wrappers os=sles15" in text
    assert (
        "+      modules: [cray-hdf5-parallel/1.14.3.5, cray-netcdf-hdf5parallel/4.9.0.17]" in text
    )
    assert "+      require: ['@4.1']" in text
    # Spack concretized the proposal, the site environment and the container environment
    assert "DAG difference of environments/archer2" in proc.stdout
    assert "cray-mpich               8.1.27 -> 9.0.1  [external]" in proc.stdout
    assert "mpich                    3.4.3 -> 4.1.2  [rebuild]" in proc.stdout
    check = subprocess.run(["git", "-C", PROJECT_ROOT, "apply", "--check", patch])
    assert check.returncode == 0, "the proposal does not apply to the checkout"


def test_a_major_release_names_the_base_change_the_pin_and_the_rebuild(trees, tmp_path):
    """CPE 23.09 (cray-mpich 8.1.27) -> 25.09 (9.0.1): every CPE component moves, the MPICH
    base 3.4a2 -> 4.1.2 moves the container's pin, and the image is rebuilt and verified."""
    patch = tmp_path / "update.diff"
    proc = drift("archer2", "--root", trees["25.09"], "--write", patch)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "default changed: 8.1.27 -> 9.0.1" in line_of(proc.stdout, "cray-mpich")
    assert "default changed: 1.12.1.2.2.0.0 -> 2.3.1" in line_of(proc.stdout, "libfabric")
    consequence = next(line for line in proc.stdout.splitlines() if "consequence:" in line)
    assert "ANL MPICH base 3.4a2 -> 4.1.2" in consequence and "from 3.4 to 4.1" in consequence
    assert "rebuild the image on the new pin and verify it again" in consequence
    assert "+      require: ['@4.1']  # climstack drift: cray-mpich 9.0.1" in patch.read_text()
    assert "9 of 10 Cray PE externals drifted" in proc.stdout


def test_frontier_against_its_own_release_is_clean(trees):
    """site/frontier pins CPE 26.03 (cray-mpich 9.1.0) in the GCC 12.3 build directories the
    stand-in tree has from 25.09 on: every external is found, none drifts."""
    proc = drift("frontier", "--root", trees["26.03"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(CPE 26.03)" in proc.stdout.splitlines()[0]
    assert "0 of 9 Cray PE externals drifted" in proc.stdout


@pytest.mark.parametrize("site", ["setonix", "perlmutter"])
def test_the_other_26_03_sites_have_no_version_drift_on_26_03(trees, site):
    """Setonix and Perlmutter pin CPE 26.03 too: no component's default differs (their xpmem
    directories, system or versioned, are not the stand-in tree's)."""
    proc = drift(site, "--root", trees["26.03"])
    assert "(CPE 26.03)" in proc.stdout.splitlines()[0], proc.stdout + proc.stderr
    assert "default changed" not in proc.stdout and "consequence" not in proc.stdout
    assert line_of(proc.stdout, "cray-mpich").endswith(" ok")


@pytest.fixture
def frontier_copy(tmp_path) -> Path:
    """site/frontier, the scope it includes and its container environment, copied."""
    for name in ("site/frontier", "site/cray-ex", "containers/frontier"):
        shutil.copytree(PROJECT_ROOT / name, tmp_path / name)
    return tmp_path / "site" / "frontier"


def test_frontier_upgrade_from_25_09_to_26_03_is_the_tools_proposal(trees, frontier_copy):
    """The upgrade docs/sites.md shows, both ways: the scope taken back to CPE 25.09 by the
    tool, then forward to 26.03 again, ends with site/frontier's own pins; the MPICH base
    4.1.2 -> 4.2.2 moves the container's pin from 4.1 to 4.2."""
    back = drift(frontier_copy, "--root", trees["26.03 not yet default"], "--apply", "--no-dag")
    assert "default changed: 9.1.0 -> 9.0.1" in line_of(back.stdout, "cray-mpich"), back.stdout
    assert "cpe/25.09" in (frontier_copy / "packages.yaml").read_text()
    patch = frontier_copy.parent.parent / "update.diff"
    proc = drift(frontier_copy, "--root", trees["26.03"], "--write", patch, "--no-dag")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "7 of 9 Cray PE externals drifted" in proc.stdout
    consequence = next(line for line in proc.stdout.splitlines() if "consequence:" in line)
    assert "ANL MPICH base 4.1.2 -> 4.2.2" in consequence and "from 4.1 to 4.2" in consequence
    text = patch.read_text()
    assert "+      modules: [PrgEnv-cray, cce/21.0.0, cpe/26.03]" in text  # the CPE module too
    assert "+      require: ['@4.2']  # climstack drift: cray-mpich 9.1.0" in text
    forward = subprocess.run(["patch", "-p1", "-i", patch], cwd=patch.parent)
    assert forward.returncode == 0
    copy, ours = sites.get(str(frontier_copy)), sites.get("frontier")
    assert pinned_modules(copy) == pinned_modules(ours)


def test_apply_keeps_comments_and_spack_reads_the_result(trees, site_copy):
    before = (site_copy / "packages.yaml").read_text()
    proc = drift(site_copy, "--root", trees["25.03"], "--apply", "--no-dag")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    after = (site_copy / "packages.yaml").read_text()
    comments = [line for line in before.splitlines() if line.lstrip().startswith("#")]
    assert comments and all(line in after.splitlines() for line in comments)
    merged = run_spack("-C", str(site_copy), "config", "get", "packages").stdout
    assert "cray-mpich@8.1.32" in merged and "/opt/cray/pe/mpich/8.1.32/ofi/gnu/9.1" in merged
    assert drift(site_copy, "--root", trees["25.03"]).returncode == 0  # now clean


def test_apply_that_crashes_leaves_the_old_file(trees, site_copy, monkeypatch, capsys):
    """A crash climstack did not expect is a tool failure (exit 3, one line, where to report
    it), and the file is left as it was."""
    before = (site_copy / "packages.yaml").read_text()

    def crash(*args):
        raise OSError("simulated crash while renaming")

    monkeypatch.setattr(os, "replace", crash)
    status = main(["drift", str(site_copy), "--root", str(trees["25.03"]), "--apply", "--no-dag"])
    assert status == 3
    assert "internal error: OSError: simulated crash while renaming" in capsys.readouterr().err
    assert (site_copy / "packages.yaml").read_text() == before
    assert sorted(p.name for p in site_copy.iterdir()) == sorted(
        p.name for p in (PROJECT_ROOT / "site" / "archer2").iterdir()
    )


def test_a_modules_only_external_is_resolved_from_its_modulefile(trees, site_copy, tmp_path):
    packages = site_copy / "packages.yaml"
    packages.write_text(
        packages.read_text().replace("      prefix: /opt/cray/pe/pmi/6.1.12\n", "")
    )
    proc = drift(site_copy, "--root", trees["23.09"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # a modulefile that does not parse is named, exit 2, nothing written
    root = tmp_path / "broken"
    shutil.copytree(trees["23.09"], root, symlinks=True)
    modulefile = root / "opt/cray/pe/modulefiles/cray-pmi/6.1.12"
    modulefile.write_text("setenv CRAY_PMI_PREFIX {unbalanced\n")
    patch = tmp_path / "update.diff"
    proc = drift(site_copy, "--root", root, "--write", patch)
    assert proc.returncode == 2
    assert f"{modulefile}: not a Tcl modulefile" in proc.stderr
    assert not patch.exists()


def test_lmod_modulefiles_and_default_links(tmp_path):
    lmod = tmp_path / "opt/cray/pe/lmod/modulefiles/mpi/gnu/12.0/ofi/1.0/cray-mpich"
    lmod.mkdir(parents=True)
    (lmod / "8.1.32.lua").write_text(
        'local base = "/opt/cray/pe/mpich/8.1.32"\n'
        'setenv("CRAY_MPICH_DIR", base .. "/ofi/gnu/12.3")\n'
    )
    (lmod / "default").symlink_to("8.1.32.lua")
    pe = cray_pe.CrayPe(tmp_path)
    assert pe.module_default("cray-mpich") == ("8.1.32", str(lmod / "default"))
    prefix = pe.module_prefix("cray-mpich/8.1.32", "CRAY_MPICH_DIR")
    assert prefix == "/opt/cray/pe/mpich/8.1.32/ofi/gnu/12.3"


@pytest.mark.parametrize(
    "case, message",
    [
        ("no-tree", "no readable Cray PE under"),
        ("local", "has no Cray PE externals"),
    ],
)
def test_bad_input_is_refused(trees, tmp_path, case, message):
    site, root = ("local", trees["23.09"]) if case == "local" else ("archer2", tmp_path / "x")
    proc = drift(site, "--root", root, "--write", tmp_path / "out.diff")
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "fix:" in proc.stderr
    assert not (tmp_path / "out.diff").exists()
