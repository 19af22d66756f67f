"""Apptainer recipes (definition files) split once: stages, each from its `Bootstrap:` line,
into a header and sections, every line kept as written.

spython's SingularityParser cannot read our recipes (containers/*/app.def): it refuses a
`Bootstrap:` other than docker (our `{{ bootstrap }}` build argument, a `localimage` base),
files %arguments under comments, and strips every line and drops blank ones, which loses the
indentation of the spack.yaml that %post writes and the text of %help, %test and
%environment (it converts them for a Dockerfile). The tests still parse the rendered
recipes with it (tests/test_containers.py).
"""

import re
from dataclasses import dataclass

#: Apptainer's sections (a line `%name` outside them is text of the section it is in)
SECTIONS = frozenset(
    ("arguments", "help", "setup", "files", "labels", "environment", "pre", "post")
    + ("runscript", "test", "startscript", "appinstall", "appfiles", "appenv", "apptest")
    + ("apphelp", "applabels", "apprun", "appstart")
)
HEADING = re.compile(r"%(\w+)(?:[ \t]+(.*?))?[ \t]*\n?")
STAGE_START = re.compile(r"^Bootstrap:", re.MULTILINE)


@dataclass(frozen=True)
class Section:
    name: str  #: files
    argument: str  #: what follows the name: `from build` of `%files from build`
    body: str  #: the lines after the heading, as written

    def lines(self) -> list[str]:
        """The body's lines stripped, without blank lines and comments."""
        stripped = (line.strip() for line in self.body.splitlines())
        return [line for line in stripped if line and not line.startswith("#")]


@dataclass(frozen=True)
class Stage:
    text: str  #: as written: header, headings and bodies
    header: str  #: the lines before the first section
    sections: tuple[Section, ...]

    def section(self, name: str, argument: str = "") -> Section | None:
        """The first section `name` (with that argument: `files`, `from build`)."""
        return next((s for s in self.sections if (s.name, s.argument) == (name, argument)), None)

    @property
    def name(self) -> str:
        """The header's `Stage:`, '' without one."""
        found = re.search(r"^Stage:[ \t]*(\S*)", self.header, re.MULTILINE)
        return found.group(1) if found else ""


def stages(text: str) -> list[Stage]:
    """The stages of a recipe, in order; joined, their texts are the recipe."""
    starts = [match.start() for match in STAGE_START.finditer(text)][1:]
    bounds = zip([0, *starts], [*starts, len(text)])
    return [_stage(text[a:b]) for a, b in bounds]


def _stage(text: str) -> Stage:
    lines = text.splitlines(keepends=True)
    heads = [
        (i, found)
        for i, line in enumerate(lines)
        if (found := HEADING.fullmatch(line)) and found.group(1) in SECTIONS
    ]
    sections = tuple(
        Section(found.group(1), found.group(2) or "", "".join(lines[i + 1 : end]))
        for (i, found), end in zip(heads, [j for j, _ in heads[1:]] + [len(lines)])
    )
    return Stage(text, "".join(lines[: heads[0][0] if heads else len(lines)]), sections)


def files(text: str) -> list[tuple[str, str]]:
    """(source, destination) of the first stage's %files from the host (no `from`); a
    line without a destination copies to the same path."""
    section = stages(text)[0].section("files")
    pairs = [line.split() for line in section.lines()] if section else []
    return [(words[0], words[-1]) for words in pairs]


def labels(text: str) -> dict[str, str]:
    """The final stage's %labels: name -> value."""
    section = stages(text)[-1].section("labels")
    pairs = [line.split(None, 1) for line in section.lines()] if section else []
    return {words[0]: words[1] if len(words) > 1 else "" for words in pairs}


def arguments(text: str, stage: int = -1) -> dict[str, str]:
    """A stage's %arguments (Apptainer's build arguments and their defaults)."""
    section = stages(text)[stage].section("arguments")
    pairs = [line.split("=", 1) for line in section.lines()] if section else []
    return {words[0]: words[1] if len(words) > 1 else "" for words in pairs}


def heredoc(body: str, marker: str) -> str | None:
    """The text of the here-document `<< 'marker'` in a shell body, None without one."""
    lines = body.splitlines()
    start = next((i for i, line in enumerate(lines) if f"<< '{marker}'" in line), None)
    if start is None or marker not in lines[start + 1 :]:
        return None
    return "\n".join(lines[start + 1 : lines.index(marker, start + 1)])
