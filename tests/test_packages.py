"""Our package repository: Spack loads and audits every package; Spack's style holds."""

import subprocess
import sys

import pytest
from conftest import PROJECT_ROOT

from climstack import spack
from climstack.stack import environments
from climstack_dev import IN_SPACK

PACKAGES = sorted(p.name for p in (PROJECT_ROOT / "repo" / "packages").iterdir())


def test_repo_holds_the_packages_the_stack_needs():
    assert {"mpibench", "netcdf-bench", "benchio", "xpmem-stub", "mpi-probe", "mom6"} <= set(
        PACKAGES
    )


def test_spack_audit_packages_passes():
    proc = spack.run(
        "audit", "packages", *PACKAGES, env=environments.resolve("local"), check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "FAILED" not in proc.stdout


@pytest.mark.parametrize(
    "tool",
    [
        ["flake8", "packages"],
        ["black", "--check", "packages"],
        ["isort", "--check-only", "packages"],
    ],
)
def test_package_style(tool):
    proc = subprocess.run(
        [sys.executable, "-m", *tool], cwd=PROJECT_ROOT / "repo", capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def is_hex(text, length: int) -> bool:
    return len(text or "") == length and all(c in "0123456789abcdef" for c in text)


def test_every_package_pins_a_real_version():
    """The version Spack picks for each package is reproducible: a git commit (40 hex), a
    sha256-checked tarball, or sources shipped beside the recipe (nothing downloaded)."""
    found = spack.DEFAULT.python(IN_SPACK, "pins", *PACKAGES, env=environments.resolve("local"))
    assert set(found) == set(PACKAGES)
    for name, package in found.items():
        pin = package["pin"]
        if package["git"] or package["url"]:  # hdf5 has both: its versions are tarballs
            pinned = is_hex(pin.get("commit"), 40) or is_hex(pin.get("sha256"), 64)
            assert pinned, (name, package)
        else:
            assert not package["has_code"] and not pin, (name, package)
    assert found["mpibench"]["pin"]["commit"] == "4c855b8d4d192b67dff1fbc37ec4bc82333f3c0b"


@pytest.mark.parametrize("tool", [["flake8"], ["black", "--check", "--quiet"]])
def test_project_python_style(tool):
    """The same tools cover the tool package, the tests and the benchmarks (.flake8,
    pyproject.toml)."""
    proc = subprocess.run(
        [sys.executable, "-m", *tool, "climstack", "tests", "benchmarks"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
