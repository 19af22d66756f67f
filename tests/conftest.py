"""Shared fixtures: the project's real Spack, run hermetically (no ~/.spack, no network)."""

import json
import os
import shutil
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from skip_policy import pytest_runtest_makereport  # noqa: F401 - the hook, registered here

from climstack import spack
from climstack.common import atomic
from climstack.pins import PROJECT_ROOT  # noqa: F401 - tests import it from here
from climstack.pins import cache_dir
from climstack.stack import environments
from climstack_dev import centre

# Host-independence: ignore the user's and the system's Spack configuration.
os.environ["SPACK_DISABLE_LOCAL_CONFIG"] = "1"
# Hypothesis keeps its files in the user cache, not in the checkout (which must stay clean)
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(cache_dir() / "hypothesis"))

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
    signed (centre_a of climstack_dev/centre.py)."""
    return centre.centre_a()


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """The Debian image with mpi-probe built against several MPIs (climstack_dev), as a
    hard-linked copy: the mount points tests create go into the copy, never the cache."""
    from climstack_dev import programs

    if not all(map(shutil.which, ("ch-run", "mmdebstrap", "gcc"))):  # what builds and runs it
        pytest.skip(needs_charliecloud.kwargs["reason"])
    cached = programs.probe_image()
    before = tree(cached)
    yield programs.probe_image_copy(tmp_path_factory.mktemp("image"))
    assert tree(cached) == before, f"the tests changed the cached image {cached}"


@pytest.fixture(scope="module")
def abi_image():
    """The MPI-5 standard ABI image (containers/mpi-abi), a tests' copy of its directory."""
    from climstack.image import image as images_
    from climstack_dev import images

    if not all(map(shutil.which, ("ch-run", "mmdebstrap", "patchelf"))):
        pytest.skip("needs Debian's charliecloud, mmdebstrap and patchelf (bin/setup)")
    return images_.build("container-mpi-abi", images.image_dir("container-mpi-abi"))


@pytest.fixture(scope="module")
def archer2_image() -> Path:
    """The ARCHER2 image `make local` built (container-archer2), as the user's cache has it."""
    from climstack.image import image as images_

    found = images_.default_destination("container-archer2")
    if not found.is_dir():
        pytest.fail(f"no image {found}: run `make local` first")
    return found


def tree(root) -> set[str]:
    """Every path under root (what prepare_image would add to)."""
    return {os.path.join(top, name) for top, dirs, files in os.walk(root) for name in dirs + files}


# --- side by side (pytest-xdist) ------------------------------------------------------
#: marks a test that times MPI loops (benchmarks): ranks that busy-poll on a core shared with
#: another test's build slow down 20x or worse, so it runs with no other test beside it (the
#: module fixtures it builds first included). Every other test shares the CPUs.
cpus_alone = pytest.mark.cpus_alone


#: the work queue's head and tail (make test keeps this order: --no-loadscope-reorder, not
#: xdist's largest-module-first, which queued the 170 s recipe build of a fresh machine
#: last, alone). First the modules whose fixtures build the most on a fresh machine, then
#: the longest warm one (test_verify.py, ~45 s), so that the short modules even out the
#: two workers; last those with cpus_alone tests, which wait for the other worker's test
#: in hand (at the tail those are short), the longer first.
FIRST = (
    "test_apptainer_recipe.py",
    "test_oci_buildcache.py",
    "test_apptainer.py",
    "test_buildcache.py",
    "test_lock_cache.py",
    "test_verify.py",
)
LAST = ("test_slurm.py", "test_bench.py")


def pytest_collection_modifyitems(items):
    def rank(item):
        name = item.path.name
        if name in FIRST:
            return FIRST.index(name)
        return len(FIRST) + 1 + LAST.index(name) if name in LAST else len(FIRST)

    items.sort(key=rank)  # stable: each module keeps its own order


def pytest_configure(config):
    config.addinivalue_line("markers", "cpus_alone: time MPI loops with no other test beside")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each test holds the CPUs shared, or exclusively where marked cpus_alone. A waiting
    exclusive test holds the turnstile, which every test passes on its way in, so the
    shared ones cannot keep it waiting."""
    base = item.config._tmp_path_factory.getbasetemp()
    locks = base.parent if hasattr(item.config, "workerinput") else base  # the session's
    exclusive = item.get_closest_marker("cpus_alone") is not None
    with ExitStack() as held:
        with atomic.locked(locks / "turnstile"):
            if exclusive:
                held.enter_context(atomic.locked(locks / "cpus"))
        if not exclusive:
            held.enter_context(atomic.locked(locks / "cpus", shared=True))
        yield


GIT_STATUS = pytest.StashKey[str]()
DAEMONS = pytest.StashKey[set]()
GPG_AGENTS = pytest.StashKey[set]()
OLD_SESSIONS = pytest.StashKey[subprocess.Popen | None]()


def git_status() -> str:
    return subprocess.run(
        ["git", "-C", str(PROJECT_ROOT), "status", "--porcelain"], capture_output=True, text=True
    ).stdout


def controls(config) -> bool:
    """Whether this process runs the session: the only one, or pytest-xdist's controller
    (whose workers run the tests, their temporary directories below its own)."""
    return not hasattr(config, "workerinput")


def pytest_sessionstart(session):
    config = session.config
    config.stash[GIT_STATUS] = git_status()
    if controls(config):
        config.stash[DAEMONS] = daemons(*daemon_marks(config))
        config.stash[GPG_AGENTS] = _gpg_agent_homes()
        config.stash[OLD_SESSIONS] = remove_old_sessions(config._tmp_path_factory.getbasetemp())


def pytest_sessionfinish(session, exitstatus):
    """Once every test is done: no test (and no command a test runs) changed the checkout,
    the gpg-agents `spack gpg` started for the tests' keyrings are stopped, and no daemon
    the tests started still runs."""
    config = session.config
    if not controls(config):
        return
    if removing := config.stash.get(OLD_SESSIONS, None):
        removing.wait()
    problems = []
    before, after = config.stash.get(GIT_STATUS, ""), git_status()
    if after != before:
        problems.append(f"the checkout changed during the tests:\n{after}")
    if not stop_gpg_agents(config.stash[GPG_AGENTS]):
        problems.append("a gpg-agent the tests started is still running")
    left = daemons(*daemon_marks(config)) - config.stash[DAEMONS]
    if left:
        problems.append("daemons the tests started still run:\n" + "\n".join(sorted(left)))
    if problems:
        print("\n" + "\n".join(problems))
        session.exitstatus = 1


def remove_old_sessions(basetemp, keep: int = 3) -> subprocess.Popen | None:
    """What pytest does as a session ends, started in the background as it begins: remove
    the temporary directories of all but the newest `keep` sessions (pytest-N), about
    150,000 files (images, Spack clones and installs) and 16 s after the last test. A
    directory whose pytest still runs (its .lock names a live process) is left alone."""
    number = basetemp.name.removeprefix("pytest-")
    if not number.isdigit():  # --basetemp: no numbered sessions
        return None
    old = []
    for path in basetemp.parent.glob("pytest-*"):
        suffix = path.name.removeprefix("pytest-")
        if suffix.isdigit() and int(suffix) <= int(number) - keep and not _running(path):
            old.append(path)
    return subprocess.Popen(["rm", "-rf", "--", *old]) if old else None


def _running(session_dir) -> bool:
    try:
        os.kill(int((session_dir / ".lock").read_text()), 0)
    except PermissionError:  # another user's process
        return True
    except (OSError, ValueError):  # no lock, or its process is gone
        return False
    return True


@pytest.fixture
def git_status_at_start(request) -> str:
    return request.config.stash[GIT_STATUS]


#: daemons the tests start (the Slurm cluster, spack gpg); each must be stopped by them
DAEMON_NAMES = ("munged", "slurmctld", "slurmd", "slurmstepd", "gpg-agent", "docker-registry")


def daemon_marks(config) -> tuple[str, str]:
    """Where the state of the tests' daemons lives: the session's temporary directories
    (the workers' are inside the controller's) and the user cache."""
    return str(config._tmp_path_factory.getbasetemp()), str(cache_dir())


def daemons(*marks: str) -> set[str]:
    """'pid command line' of the running DAEMON_NAMES whose command line names a mark."""
    out = subprocess.run(["ps", "-eo", "pid=,comm=,args="], capture_output=True, text=True)
    return {
        f"{pid} {args}"
        for pid, comm, args in (line.split(None, 2) for line in out.stdout.splitlines())
        if comm in DAEMON_NAMES and any(mark in args for mark in marks)
    }


def stop_gpg_agents(before: set[str]) -> bool:
    """Stop the gpg-agents started since (one per keyring the tests created); whether they
    all exited."""
    for home in _gpg_agent_homes() - before:
        subprocess.run(["gpgconf", "--homedir", home, "--kill", "gpg-agent"], check=False)
    deadline = time.monotonic() + 30  # the agent exits asynchronously after --kill
    while _gpg_agent_homes() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    return not _gpg_agent_homes() - before


def _gpg_agent_homes() -> set[str]:
    out = subprocess.run(["pgrep", "-a", "gpg-agent"], capture_output=True, text=True).stdout
    return {
        line.split("--homedir", 1)[1].split()[0]
        for line in out.splitlines()
        if "--homedir" in line
    }
