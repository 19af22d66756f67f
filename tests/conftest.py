"""Shared fixtures: the project's real Spack, run hermetically (no ~/.spack, no network)."""

import json
import os
import shutil
import subprocess
import time

import pytest

from skip_policy import pytest_runtest_makereport  # noqa: F401 - the hook, registered here

from climstack.build import environments
from climstack.config import spack
from climstack.testing import centre
from climstack.pins import PROJECT_ROOT  # noqa: F401 - tests import it from here
from climstack.pins import cache_dir

# Host-independence: ignore the user's and the system's Spack configuration.
os.environ["SPACK_DISABLE_LOCAL_CONFIG"] = "1"

#: tests that run containers need Debian's charliecloud, mmdebstrap and gcc
needs_charliecloud = pytest.mark.skipif(
    not all(map(shutil.which, ("ch-run", "mmdebstrap", "gcc"))),
    reason="needs Debian's charliecloud, mmdebstrap and gcc (bin/setup installs them)",
)


@pytest.fixture(scope="session")
def concretized():
    """Concretize an environment --fresh once per session; returns its nodes by hash."""
    done = {}

    def concretize(name: str) -> dict:
        if name not in done:
            env_dir = environments.resolve(name)
            environments.concretize(env_dir)
            lock = json.loads((env_dir / "spack.lock").read_text())
            done[name] = lock
        return done[name]

    return concretize


def lock_nodes(lock: dict) -> list[dict]:
    return list(lock["concrete_specs"].values())


def roots(lock: dict) -> list[dict]:
    return [lock["concrete_specs"][r["hash"]] for r in lock["roots"]]


def run_spack(*args, **kwargs):
    return spack.run(*args, **kwargs)


@pytest.fixture(scope="session")
def centre_a():
    """Centre A of the buildcache tests (file:// and OCI): the slice built once and pushed
    signed (climstack.testing.centre.centre_a)."""
    return centre.centre_a()


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """The Debian image with mpi-probe built against several MPIs (climstack.testing), as a
    hard-linked copy: the mount points tests create go into the copy, never the cache."""
    from climstack.testing import programs

    if not all(map(shutil.which, ("ch-run", "mmdebstrap", "gcc"))):  # what builds and runs it
        pytest.skip(needs_charliecloud.kwargs["reason"])
    cached = programs.probe_image()
    before = tree(cached)
    yield programs.probe_image_copy(tmp_path_factory.mktemp("image"))
    assert tree(cached) == before, f"the tests changed the cached image {cached}"


def tree(root) -> set[str]:
    """Every path under root (what prepare_image would add to)."""
    return {os.path.join(top, name) for top, dirs, files in os.walk(root) for name in dirs + files}


GIT_STATUS = pytest.StashKey[str]()


def git_status() -> str:
    return subprocess.run(
        ["git", "-C", str(PROJECT_ROOT), "status", "--porcelain"], capture_output=True, text=True
    ).stdout


def pytest_sessionstart(session):
    session.config.stash[GIT_STATUS] = git_status()


def pytest_sessionfinish(session, exitstatus):
    """No test (and no command a test runs) may change the checkout."""
    before, after = session.config.stash.get(GIT_STATUS, ""), git_status()
    if after != before:
        print(f"\nthe checkout changed during the tests:\n{after}")
        session.exitstatus = 1


@pytest.fixture
def git_status_at_start(request) -> str:
    return request.config.stash[GIT_STATUS]


#: daemons the tests start (the Slurm cluster, spack gpg); each must be stopped by them
DAEMON_NAMES = ("munged", "slurmctld", "slurmd", "slurmstepd", "gpg-agent", "docker-registry")


def daemons(*marks: str) -> set[str]:
    """'pid command line' of the running DAEMON_NAMES whose command line names a mark."""
    out = subprocess.run(["ps", "-eo", "pid=,comm=,args="], capture_output=True, text=True)
    return {
        f"{pid} {args}"
        for pid, comm, args in (line.split(None, 2) for line in out.stdout.splitlines())
        if comm in DAEMON_NAMES and any(mark in args for mark in marks)
    }


@pytest.fixture(scope="session", autouse=True)
def no_daemons_left(tmp_path_factory):
    """At the end, no daemon of this session runs: those that state live in its temporary
    directories or in the user cache (Slurm's munged, slurmctld, slurmd; gpg-agents)."""
    marks = (str(tmp_path_factory.getbasetemp()), str(cache_dir()))
    before = daemons(*marks)
    yield
    left = daemons(*marks) - before
    assert not left, "daemons the tests started still run:\n" + "\n".join(sorted(left))


@pytest.fixture(scope="session", autouse=True)
def stop_gpg_agents(no_daemons_left):
    """`spack gpg` starts a gpg-agent per keyring the tests create: stop those at the end
    (before no_daemons_left looks)."""
    before = _gpg_agent_homes()
    yield
    for home in _gpg_agent_homes() - before:
        subprocess.run(["gpgconf", "--homedir", home, "--kill", "gpg-agent"], check=False)
    deadline = time.monotonic() + 30  # the agent exits asynchronously after --kill
    while _gpg_agent_homes() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _gpg_agent_homes() - before, "a gpg-agent the tests started is still running"


def _gpg_agent_homes() -> set[str]:
    out = subprocess.run(["pgrep", "-a", "gpg-agent"], capture_output=True, text=True).stdout
    return {
        line.split("--homedir", 1)[1].split()[0]
        for line in out.splitlines()
        if "--homedir" in line
    }
