"""Run by `spack -e ENV python` (not imported by climstack): load and validate every config
section the environment sees, then print, as JSON, what its concretization depends on.

That is Spack's merged configuration of the sections the solver reads, the environment's
user specs (its definitions evaluated, `when:` clauses included), the repositories in
use and the host's platform, OS and target. climstack.stack.lock_cache digests it.
"""

import json
import sys

import spack.config
import spack.environment
import spack.platforms
import spack.repo
import spack.vendor.archspec.cpu

#: every section an environment may set: loading them is what validates them
SECTIONS = sys.argv[1].split(",")
#: the sections the concretizer reads (mirrors, modules, view, install tree: it does not)
SOLVER_SECTIONS = ("concretizer", "packages", "develop", "toolchains", "compilers")

merged = {section: spack.config.get(section) for section in SECTIONS}
platform = spack.platforms.host()
print(
    json.dumps(
        {
            "config": {s: spack.config.get(s) for s in SOLVER_SECTIONS},
            "deprecated": spack.config.get("config:deprecated", False),
            "specs": [str(s) for s in spack.environment.active_environment().user_specs],
            "repos": {repo.namespace: repo.root for repo in spack.repo.PATH.repos},
            "host": [
                str(platform),
                str(platform.default_operating_system()),
                spack.vendor.archspec.cpu.host().name,
            ],
        },
        sort_keys=True,
        default=str,
    )
)
