"""Shared fixtures: the project's real Spack, run hermetically (no ~/.spack, no network)."""

import json
import os
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

# Host-independence: ignore the user's and the system's Spack configuration.
os.environ["SPACK_DISABLE_LOCAL_CONFIG"] = "1"

from climstack import environments, spack  # noqa: E402


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


@pytest.fixture(scope="module")
def image():
    """The Debian image with mpi-probe built against several MPIs (tests/bind_helpers.py)."""
    import bind_helpers

    return bind_helpers.probe_image()
