"""Apptainer build arguments of a recipe: each stage's %arguments defaults, and the recipe
as `apptainer build --build-arg NAME=VALUE` renders it (Apptainer >= 1.2 replaces every
`{{ name }}` of a stage, header included, with the --build-arg or the stage's default).
"""

import re

from climstack.errors import ClimstackError
from climstack.stack import recipes

PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def defaults(stage: recipes.Stage) -> dict[str, str]:
    """NAME=VALUE lines of the stage's %arguments section (comments and blanks skipped)."""
    section = stage.section("arguments")
    lines = section.lines() if section else []
    return dict(line.split("=", 1) for line in lines if "=" in line)


def names(recipe_text: str) -> set[str]:
    return {name for stage in recipes.stages(recipe_text) for name in defaults(stage)}


def render(recipe_text: str, overrides: dict[str, str], source: str = "the recipe") -> str:
    """The recipe with its placeholders filled, as Apptainer would build it."""
    unknown = sorted(set(overrides) - names(recipe_text))
    if unknown:
        raise ClimstackError(
            f"{source} has no build argument {', '.join(unknown)}",
            fix=f"use one of: {', '.join(sorted(names(recipe_text)))}",
        )
    rendered = []
    for stage in recipes.stages(recipe_text):
        values = {**defaults(stage), **overrides}
        missing = sorted(set(PLACEHOLDER.findall(stage.text)) - set(values))
        if missing:
            raise ClimstackError(
                f"{source}: a stage uses {', '.join(missing)} without declaring it",
                fix="add NAME=DEFAULT lines to that stage's %arguments section",
            )
        rendered.append(PLACEHOLDER.sub(lambda match: values[match.group(1)], stage.text))
    return "".join(rendered)
