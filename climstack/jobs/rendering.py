"""Every job script is rendered from a Jinja template, as Spack's container writers and
stackinator write their files: the template shows the file's shape, the code fills values.
`render(package, name, **values)` renders `name` from the package's `templates/`."""

import functools

import jinja2


@functools.cache
def _environment(package: str) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader(package),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )


def render(package: str, name: str, **values) -> str:
    return _environment(package).get_template(name).render(**values)
