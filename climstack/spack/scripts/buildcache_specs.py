"""Run by `spack -c mirrors:{...} python` (not imported by climstack): every non-external
spec in the configured buildcaches, as one JSON list (name, version, hash, platform, os,
target, and the MPI it depends on). climstack.stack.buildcache lists a cache with it."""

import json

import spack.binary_distribution as bd

print(
    json.dumps(
        [
            {
                "name": s.name,
                "version": str(s.version),
                "hash": s.dag_hash(),
                "platform": s.architecture.platform,
                "os": s.architecture.os,
                "target": str(s.architecture.target),
                "mpi": [d.format("{name}@{version}") for d in s.dependencies(virtuals=["mpi"])],
            }
            for s in bd.update_cache_and_get_specs()
            if not s.external
        ]
    )
)
