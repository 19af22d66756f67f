"""Run by `spack [-e ENV] python install_root.py ATTR` (not imported by climstack): the
install root Spack uses, as JSON: `root` (padded) or `unpadded_root` (what a path leaked
into a binary starts with)."""

import json
import sys

import spack.store

print(json.dumps(str(getattr(spack.store.STORE, sys.argv[1]))))
