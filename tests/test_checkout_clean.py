"""No command writes into the checkout: Spack's compiler auto-detection (which writes into
the highest scope, a tracked spack.yaml) never runs, and the Cray DAGs are the same
whichever compilers the concretizing host has. conftest.py also compares `git status` at
the end of the session with its start."""

import json
import os
import shutil
import subprocess

import yaml
from conftest import PROJECT_ROOT, git_status

from climstack import spack
from climstack.stack import environments, lock_cache
from climstack_dev import IN_SPACK


def tracked_manifests() -> dict[str, bytes]:
    return {
        name: path.joinpath("spack.yaml").read_bytes()
        for name, path in environments.find_environments().items()
    }


def test_spack_would_write_detected_compilers_into_a_manifest_without_our_scope(tmp_path):
    """The control: local's site scope without the detections scope (include.yaml)."""
    site = tmp_path / "site" / "local"
    shutil.copytree(PROJECT_ROOT / "site" / "local", site)
    (site / "include.yaml").unlink()
    env = tmp_path / "env"
    env.mkdir()
    manifest = {"spack": {"include": [str(environments.STACK), str(site)], "specs": ["zlib"]}}
    (env / "spack.yaml").write_text(yaml.safe_dump(manifest))
    spack.DEFAULT.python(IN_SPACK, "compilers", env=env)  # as `spack concretize` asks
    written = yaml.safe_load((env / "spack.yaml").read_text())["spack"]
    assert "/usr/bin/gcc" in json.dumps(written.get("packages", {}).get("gcc")), written


def test_no_environment_of_ours_gets_detected_compilers_written_into_it():
    before = tracked_manifests()
    for env_dir in environments.find_environments().values():
        spack.DEFAULT.python(IN_SPACK, "compilers", env=env_dir)
    assert tracked_manifests() == before


def test_archer2_lock_is_the_same_whichever_compilers_the_host_has(concretized, tmp_path):
    here = concretized("archer2")
    # another host: the user has a compiler of their own configured, and another on PATH
    user = tmp_path / "user"
    user.mkdir()
    (user / "packages.yaml").write_text(
        yaml.safe_dump(
            {
                "packages": {
                    "gcc": {
                        "externals": [
                            {
                                "spec": "gcc@12.2.0 languages:='c,c++,fortran'",
                                "prefix": "/usr",
                                "extra_attributes": {
                                    "compilers": {
                                        "c": "/usr/bin/gcc",
                                        "cxx": "/usr/bin/g++",
                                        "fortran": "/usr/bin/gfortran",
                                    }
                                },
                            }
                        ]
                    }
                }
            }
        )
    )
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "gcc-14").symlink_to("/usr/bin/gcc")
    env = tmp_path / "archer2"
    env.mkdir()
    manifest = environments.manifest(environments.resolve("archer2"))
    manifest["spack"]["include"] = [
        str((PROJECT_ROOT / "environments" / "archer2" / entry).resolve())
        for entry in manifest["spack"]["include"]
    ]
    (env / "spack.yaml").write_text(yaml.safe_dump(manifest))
    variables = {"SPACK_DISABLE_LOCAL_CONFIG": None, "SPACK_USER_CONFIG_PATH": str(user)}
    variables["PATH"] = f"{bindir}:{os.environ['PATH']}"
    # solved once per set of inputs (lock_cache's key holds the user scope's compilers)
    lock_cache.concretize(env, spack=spack.Spack(variables=variables))
    there = json.loads((env / "spack.lock").read_text())
    assert sorted(r["hash"] for r in there["roots"]) == sorted(r["hash"] for r in here["roots"])
    assert set(there["concrete_specs"]) == set(here["concrete_specs"])


def test_git_sees_no_change_after_concretizing_and_containerizing(
    concretized, git_status_at_start
):
    concretized("local")
    concretized("container-archer2")
    subprocess.run(
        [str(PROJECT_ROOT / "bin" / "climstack"), "containerize"], check=True, capture_output=True
    )
    assert git_status() == git_status_at_start
