"""The local environment's develop tree (netcdf-fortran): Spack builds it incrementally, so
it is copied afresh from the pristine tree whenever the lock builds another spec in it."""

import json

from climstack import pins
from climstack.stack.sources import develop_trees


def lock_building(env, dag_hash: str) -> None:
    nodes = {dag_hash: {"name": "netcdf-fortran"}, "other": {"name": "netcdf-c"}}
    (env / "spack.lock").write_text(json.dumps({"concrete_specs": nodes}))


def test_a_build_for_another_spec_starts_from_the_pristine_tree(tmp_path, monkeypatch):
    pristine = tmp_path / "pristine" / "netcdf-fortran-3f1916a18e5f"
    pristine.mkdir(parents=True)
    (pristine / "configure").write_text("#!/bin/sh\n")
    monkeypatch.setattr(develop_trees, "source_tree", lambda tree=None: pristine)
    monkeypatch.setattr(pins, "cache_dir", lambda: tmp_path / "cache")
    monkeypatch.delenv(develop_trees.NETCDF_FORTRAN.variable, raising=False)
    env = tmp_path / "env"
    env.mkdir()
    local = develop_trees.local_tree()
    stale = local / "fortran" / ".libs" / "libnetcdff.so.7"  # what the last build left
    lock_building(env, "aaaaaaa")
    develop_trees.refresh_for(env)
    stale.parent.mkdir(parents=True)
    stale.write_text("linked against the old netcdf-c")
    develop_trees.refresh_for(env)  # the same spec: the build goes on where it stopped
    assert stale.is_file()
    lock_building(env, "bbbbbbb")  # a dependency changed: another hash
    develop_trees.refresh_for(env)
    assert not stale.exists() and (local / "configure").is_file()
