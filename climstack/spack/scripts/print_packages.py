"""Run by `spack -C SCOPE python` (not imported by climstack): the merged `packages:` section
as `spack config get packages` and as `spack config blame packages` print it, both in one
JSON line, so that climstack.inputs.sites starts one Spack process for the two."""

import contextlib
import io
import json

import spack.config

printed = {}
for verb in ("get", "blame"):
    with contextlib.redirect_stdout(io.StringIO()) as text:
        spack.config.CONFIG.print_section("packages", blame=verb == "blame")
    printed[verb] = text.getvalue()
print(json.dumps(printed))
