"""Site scopes and environments: Spack validates them; bad input gets a clear error."""

import shutil
import subprocess

import pytest
from conftest import PROJECT_ROOT

from climstack.errors import ClimstackError
from climstack.inputs import sites
from climstack.stack import environments


@pytest.mark.parametrize("name", sorted(environments.find_environments()))
def test_every_scope_validates_against_spacks_schema(name):
    """environments/<site> uses site/<site>; every container environment site/container,
    directly or through the MPI-5 ABI image's scope, which includes it (a Cray site in a
    container environment would build against the host's Cray PE)."""
    container = "container-mpi-abi" if name == "container-mpi-abi" else "container"
    expected = container if name.startswith("container-") else name
    assert environments.check(environments.resolve(name)) == expected
    assert expected in sites.known_sites() or expected in sites.shared_scopes()


def _env_with_site(tmp_path, site_dir):
    env = tmp_path / "env"
    env.mkdir()
    (env / "spack.yaml").write_text(
        "spack:\n  include:\n"
        f"  - {PROJECT_ROOT}/environments/stack.yaml\n  - {site_dir}\n  specs: [zlib]\n"
    )
    return env


def test_misspelled_key_in_a_site_scope_names_file_and_key(tmp_path):
    site = tmp_path / "site" / "local"
    shutil.copytree(PROJECT_ROOT / "site" / "local", site)
    packages = site / "packages.yaml"
    packages.write_text(packages.read_text().replace("buildable:", "buildabel:", 1))
    with pytest.raises(ClimstackError) as error:
        environments.check(_env_with_site(tmp_path, "../site/local"))
    assert str(packages) in str(error.value) and "buildabel" in str(error.value)
    assert "fix:" in str(error.value)


def test_environment_naming_an_unknown_site(tmp_path):
    (tmp_path / "site").mkdir()
    env = _env_with_site(tmp_path, "../site/archer3")
    with pytest.raises(ClimstackError) as error:
        environments.check(env)
    message = str(error.value)
    assert "archer3" in message and str(env / "spack.yaml") in message
    assert "archer2" in message  # the fix lists the real sites


def test_cli_reports_the_error_and_exits_nonzero(tmp_path):
    (tmp_path / "site").mkdir()
    env = _env_with_site(tmp_path, "../site/archer3")
    proc = subprocess.run(
        [PROJECT_ROOT / "bin" / "climstack", "check", str(env)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "site 'archer3'" in proc.stderr and "fix:" in proc.stderr
