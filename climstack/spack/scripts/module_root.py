"""Run by `spack [-C SCOPE]... -e ENV python module_root.py` (not imported by climstack):
the root of the Lmod tree as Spack resolves the merged configuration ($user_cache_path,
...), as JSON."""

import json

import spack.config
import spack.util.path

print(
    json.dumps(spack.util.path.canonicalize_path(spack.config.get("modules:default:roots:lmod")))
)
