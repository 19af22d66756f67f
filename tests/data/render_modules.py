"""Run by `spack -C SCOPE -e ENV python render_modules.py [NAME...]` (the tests): each
package's Lmod module (the named ones, else all) as `spack module lmod refresh` would write
it, rendered from the environment's concrete specs without installing anything; as JSON,
name -> {file, text, external, external_modules}, file and text null where the scope
excludes it."""

import json
import sys

import spack.environment
import spack.modules.lmod as lmod
import spack.tengine as tengine

environment = spack.environment.active_environment()
roots = {root for _, root in environment.concretized_specs()}
found = {}
for spec in environment.all_specs():
    if (sys.argv[1:] and spec.name not in sys.argv[1:]) or spec.name in found:
        continue
    writer = lmod.LmodModulefileWriter(spec, "default", explicit=spec in roots)
    found[spec.name] = {
        "file": None,
        "text": None,
        "external": spec.external,
        "external_modules": spec.external_modules or [],
    }
    if not writer.conf.excluded:
        template = tengine.make_environment().get_template(writer._get_template())
        context = writer.context.to_dict()
        context.update(writer.conf.context)
        found[spec.name].update(file=writer.layout.filename, text=template.render(**context))
print(json.dumps(found))
