"""A new user's first commands at a centre, on a simulated login node: the set-up block of
docs/centre.md (`<!-- tested: login node -->`) run as a normal user (root drops to nobody),
in a network namespace with no network (unshare), with no apt-get, dpkg, mmdebstrap or
apptainer on the PATH and a `singularity` on it; Spack's pins from local git copies (of the
cached clones), the .venv's packages from a wheelhouse packed from this checkout's .venv
(climstack_dev.wheelhouse: pip's PIP_NO_INDEX and PIP_FIND_LINKS, no index reached).

bin/setup must end 0, name each step it leaves out, and make nothing but the pins and .venv;
on a second run, a Cray PE in the environment alone means a centre; a python3 of SLES 15
(3.6) is refused with the module to load."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

from climstack import pins
from climstack_dev import wheelhouse

PAGE = PROJECT_ROOT / "docs" / "centre.md"
#: what a Cray login node lacks (Debian's tools; the system's container runtime is singularity)
ABSENT = ("apt", "apt-get", "apt-cache", "dpkg", "dpkg-query", "mmdebstrap", "apptainer")
NOBODY = 65534
FAKES = {
    "singularity": "#!/bin/sh\necho 'singularity-ce version 4.1.0'\n",
    "module": '#!/bin/sh\necho "module $*" >> "$HOME/modules"\n',
    "python3": "#!/bin/sh\necho 'Python 3.6.15'\nexit 1\n",
}
SEARCHED = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin")


def marked_blocks(page: Path, mark: str) -> list[str]:
    """The console blocks of `page` that follow `<!-- tested: MARK -->`."""
    pattern = rf"<!-- tested: {re.escape(mark)} -->\n```console\n(.*?)```"
    return re.findall(pattern, page.read_text(), re.DOTALL)


def _link_tools(into: Path, leave_out) -> None:
    """A PATH directory with the system's programs, but those `leave_out(name)` is true of."""
    into.mkdir()
    for directory in SEARCHED:
        for program in sorted(Path(directory).iterdir()) if Path(directory).is_dir() else ():
            target = into / program.name
            if leave_out(program.name) or target.exists() or not os.access(program, os.X_OK):
                continue
            target.symlink_to(program)


def _link_or_copy(source: str, copy: str) -> None:
    try:
        os.link(source, copy)
    except OSError:  # another filesystem
        shutil.copy2(source, copy)


def _script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture(scope="module")
def node():
    """The login node's files: the checkout's files copied, bare git copies of the pins,
    the wheelhouse, a PATH without Debian's tools, a home and an empty cache; all the test
    user's, under a directory it can reach (the pytest directories are root's only)."""
    if not (shutil.which("unshare") and shutil.which("setpriv")):
        pytest.skip("needs util-linux's unshare and setpriv")
    base = Path(tempfile.mkdtemp(prefix="climstack-login-node-"))
    base.chmod(0o755)
    try:
        _link_tools(base / "bin", lambda name: name in (*ABSENT, "singularity", "module"))
        python = base / "bin" / "python3"  # the wheelhouse's wheels are for this Python
        version = "import sys; print(*sys.version_info[:2])"
        if not python.exists() or subprocess.run(
            [python, "-c", version], capture_output=True, text=True
        ).stdout.split() != [str(n) for n in sys.version_info[:2]]:
            pytest.skip(f"needs a system python3 {sys.version_info[0]}.{sys.version_info[1]}")
        listed = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
        for name in filter(None, listed.split("\0")):
            source, copy = PROJECT_ROOT / name, base / "project" / name
            if source.is_file():
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, copy)
        for pin in (pins.SPACK, pins.SPACK_PACKAGES):
            clone = pins.cache_dir() / pin.cache_name
            bare = base / "git" / f"{pin.name}.git"
            subprocess.run(["git", "clone", "-q", "--bare", str(clone), str(bare)], check=True)
        shutil.copytree(wheelhouse.from_venv(), base / "wheels", copy_function=_link_or_copy)
        for tool in ("singularity", "module"):  # the centre's (module: a shell function there)
            _script(base / "bin" / tool, FAKES[tool])
        # SLES 15's python3, and no other Python
        _link_tools(base / "sles", lambda name: name.startswith("python") or name in ABSENT)
        _script(base / "sles" / "python3", FAKES["python3"])
        for name in ("home", "cache", "tmp"):
            (base / name).mkdir()
        if os.getuid() == 0:
            subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(base)], check=True)
        yield base
    finally:  # ~100,000 files (the clones, .venv, their bytecode): removed in the background
        subprocess.Popen(["rm", "-rf", "--", str(base)], start_new_session=True)


def login(node: Path, script: str, path: str = "", **variables) -> subprocess.CompletedProcess:
    """Run `script` (bash) in the project copy as the login node's user, with no network."""
    user = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    unshare = ["unshare", "--net"] if os.getuid() == 0 else ["unshare", "-n", "--user"]
    environ = {
        "HOME": str(node / "home"),
        "USER": "nobody" if os.getuid() == 0 else os.environ.get("USER", "user"),
        "LANG": "C.UTF-8",
        "PATH": path or str(node / "bin"),
        "TMPDIR": str(node / "tmp"),
        "CLIMSTACK_CACHE": str(node / "cache"),
        "CLIMSTACK_SPACK_GIT": str(node / "git" / "spack.git"),
        "CLIMSTACK_SPACK_PACKAGES_GIT": str(node / "git" / "spack-packages.git"),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(node / "wheels"),
        **variables,
    }
    command = [*unshare, *(user if os.getuid() == 0 else []), "env", "-i"]
    command += [f"{key}={value}" for key, value in environ.items()]
    return subprocess.run(
        [*command, "bash", "-euo", "pipefail", "-c", script],
        cwd=node / "project",
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_the_centre_pages_setup_runs_on_a_login_node(node):
    (block,) = marked_blocks(PAGE, "login node")
    no_network = "python3 -c \"import socket; socket.getaddrinfo('pypi.org', 443)\" && exit 9\n"
    proc = login(node, no_network + block)
    said = proc.stderr
    assert proc.returncode == 0, said[-3000:]
    assert proc.stdout.split()[:2] == [pins.SPACK_VERSION, f"({pins.SPACK.commit})"], proc.stdout
    assert "module load cray-python" in (node / "home" / "modules").read_text()
    assert "setup: at a centre (--site archer2)" in said
    for step in (
        "Debian packages",
        "this host's compilers and build tools for the local site",
        "Debian's NetCDF-Fortran develop tree",
        "the provided Apptainer",
    ):
        assert f"setup: skipped: {step} (a centre" in said, step
    assert f"setup: container runtime: singularity at {node / 'bin' / 'singularity'}" in said
    assert (
        "setup: next: source share/activate.sh && spack env activate -d environments/archer2"
        in said
    )
    made = {p.name for p in (node / "cache").iterdir()}
    assert {pins.SPACK.cache_name, pins.SPACK_PACKAGES.cache_name} <= made
    assert not made & {"local-externals", "dev-sources", "local-sources", "apptainer"}, made
    venv = node / "project" / ".venv"
    assert (venv / ".requirements.sha256").is_file() and (venv / "bin" / "climstack").is_file()


def test_a_cray_pe_alone_means_a_centre(node):
    proc = login(node, "bin/setup", CRAYPE_VERSION="2.7.30")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "setup: at a centre (a Cray PE: CRAYPE_VERSION=2.7.30)" in proc.stderr
    assert "cloning" not in proc.stderr and "creating .venv" not in proc.stderr
    assert "spack env activate -d environments/<site>" in proc.stderr


@pytest.mark.parametrize("site, runtime", [("gaea-c6", "apptainer"), ("perlmutter", "podman-hpc")])
def test_a_site_whose_runtime_is_not_loaded_names_its_module(node, site, runtime):
    proc = login(node, f"bin/setup --site {site}")  # here: singularity only
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (
        f"setup: site {site}'s bind plans run {runtime} (`bind.runtime` of its site.yaml), not "
        f"on the PATH: `module load {runtime}` before running images, or `climstack bind "
        "--runtime singularity`"
    ) in proc.stderr


def test_lumi_runs_the_singularity_on_the_path(node):
    """LUMI's bind plans run singularity, as the login node has: no module to load."""
    proc = login(node, "bin/setup --site lumi")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"setup: container runtime: singularity at {node / 'bin' / 'singularity'}" in (
        proc.stderr
    )
    assert "not on the PATH" not in proc.stderr
    assert "spack env activate -d environments/lumi && spack install" in proc.stderr


def test_sles_python_is_refused_naming_the_module(node):
    proc = login(node, "bin/setup --site gaea-c6", path=str(node / "sles"))
    assert proc.returncode == 2, proc.stderr
    assert "no Python >= 3.11 with its venv module on the PATH (python3: Python 3.6.15)" in (
        proc.stderr
    )
    assert "fix: at a centre, `module load cray-python`" in proc.stderr
