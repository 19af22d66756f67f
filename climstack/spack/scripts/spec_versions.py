"""Run by `spack python` (not imported by climstack): the version each spec string given
names, as Spack's spec parser reads it (`cray-mpich@8.1.27 ~wrappers` -> 8.1.27, `x@=4.5`
-> 4.5), None for a spec naming none or a range; one JSON object {spec: version}."""

import json
import sys

import spack.spec

versions = {}
for text in sys.argv[1:]:
    version = spack.spec.Spec(text).versions.concrete_range_as_version
    versions[text] = None if version is None else str(version)
print(json.dumps(versions))
