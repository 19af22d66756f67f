"""Apptainer build arguments of a recipe: each stage's %arguments defaults, and the recipe
as `apptainer build --build-arg NAME=VALUE` renders it (Apptainer >= 1.2 replaces every
`{{ name }}` of a stage, header included, with the --build-arg or the stage's default).
"""

import re

from climstack.errors import ClimstackError

PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")
STAGE_START = re.compile(r"^Bootstrap:", re.MULTILINE)


def stages(recipe_text: str) -> list[str]:
    starts = [match.start() for match in STAGE_START.finditer(recipe_text)] or [0]
    return [recipe_text[a:b] for a, b in zip(starts, [*starts[1:], len(recipe_text)])]


def defaults(stage_text: str) -> dict[str, str]:
    """NAME=VALUE lines of the stage's %arguments section (comments and blanks skipped)."""
    section = re.search(r"^%arguments\n(.*?)(?=^%|\Z)", stage_text, re.MULTILINE | re.DOTALL)
    lines = section.group(1).splitlines() if section else []
    pairs = (line.strip().split("=", 1) for line in lines if "=" in line)
    return {name: value for name, value in pairs if not name.startswith("#")}


def names(recipe_text: str) -> set[str]:
    return {name for stage in stages(recipe_text) for name in defaults(stage)}


def render(recipe_text: str, overrides: dict[str, str], source: str = "the recipe") -> str:
    """The recipe with its placeholders filled, as Apptainer would build it."""
    unknown = sorted(set(overrides) - names(recipe_text))
    if unknown:
        raise ClimstackError(
            f"{source} has no build argument {', '.join(unknown)}",
            fix=f"use one of: {', '.join(sorted(names(recipe_text)))}",
        )
    rendered = []
    for stage in stages(recipe_text):
        values = {**defaults(stage), **overrides}
        missing = sorted(set(PLACEHOLDER.findall(stage)) - set(values))
        if missing:
            raise ClimstackError(
                f"{source}: a stage uses {', '.join(missing)} without declaring it",
                fix="add NAME=DEFAULT lines to that stage's %arguments section",
            )
        rendered.append(PLACEHOLDER.sub(lambda match: values[match.group(1)], stage))
    return "".join(rendered)
