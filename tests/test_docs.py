"""The documentation: README.md stays short and its links resolve; the mkdocs site of docs/
builds with --strict (every link and anchor resolves, no page outside the nav), into a
temporary directory, never the checkout; docs/index.md lists every page; the quickstart's
steps are make local's (workflow.LOCAL); every command line of the pages a new user follows
is one `climstack` and `bin/setup` accept."""

import contextlib
import io
import itertools
import re
import shlex
import subprocess

import pytest
import yaml
from conftest import PROJECT_ROOT

from climstack import setup as climstack_setup
from climstack import workflow
from climstack.__main__ import parser

MKDOCS = PROJECT_ROOT / ".venv" / "bin" / "mkdocs"
README = PROJECT_ROOT / "README.md"
DOCS = PROJECT_ROOT / "docs"

#: a Markdown link's target: [text](target) or [text]: target
LINK = re.compile(r"\]\(([^)\s]+)\)|^\[[^\]]+\]:\s*(\S+)", re.MULTILINE)


def nav_pages(nav) -> list[str]:
    """Every page a (nested) mkdocs nav names."""
    pages = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_mkdocs_builds_strict_into_a_temporary_directory(tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--config-file", "mkdocs.yml", "--site-dir", str(site)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (site / "index.html").is_file()
    for page in DOCS.rglob("*.md"):
        name = page.relative_to(DOCS).with_suffix("")
        built = site / ("index.html" if name.name == "index" else f"{name}/index.html")
        assert built.is_file(), f"{page} was not built ({built})"


def test_every_page_of_docs_is_in_the_nav():
    config = yaml.safe_load((PROJECT_ROOT / "mkdocs.yml").read_text())
    nav = nav_pages(config["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages, "docs/ pages and mkdocs.yml's nav differ"
    assert len(nav) == len(set(nav)), "a page is twice in the nav"


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) < 150, f"README.md has {len(lines)} lines: move the detail into docs/"


def test_readme_relative_links_resolve():
    targets = [a or b for a, b in LINK.findall(README.read_text())]
    relative = [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]
    assert relative, "README.md links into docs/"
    missing = [t for t in relative if not (PROJECT_ROOT / t.split("#")[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_index_lists_every_page():
    index = DOCS / "index.md"
    listed = {a or b for a, b in LINK.findall(index.read_text())}
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if p != index}
    assert not pages - listed, f"docs/index.md does not list {sorted(pages - listed)}"


def console_blocks(page, mark: str | None = None) -> list[str]:
    """The console blocks of a page (those after `<!-- tested: MARK -->` only, if given)."""
    before = rf"<!-- tested: {re.escape(mark)} -->\n" if mark else ""
    return re.findall(rf"{before}```console\n(.*?)```", page.read_text(), re.DOTALL)


def test_the_quickstart_lists_make_locals_steps():
    (block,) = console_blocks(DOCS / "quickstart.md", "make local")

    def shown(command) -> str:
        return shlex.join(command).replace(workflow.CLIMSTACK, "bin/climstack")

    tasks = [
        f"{shown(task.command)}  # {task.name}"
        + (f", after: {', '.join(task.after)}" if task.after else "")
        + (", alone" if task.timed else "")
        for task in workflow.LOCAL
    ]
    assert block.splitlines() == tasks


def command_lines(block: str) -> list[list[str]]:
    """Each simple command of a console block (continuations joined, comments dropped,
    split at line ends, `;`, `&&`, `&`, `|`) as its words."""
    lines = block.replace("\\\n", " ").replace("\n", "\n;")
    lexer = shlex.shlex(lines, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split, lexer.commenters = True, "#"
    commands, words = [], []
    for token in lexer:
        if token in (";", "&&", "&", "|", "||"):
            commands.append(words)
            words = []
        else:
            words.append(token)
    assigning = re.compile(r"[A-Za-z_]\w*=")  # VARIABLE=value before the command
    commands = [list(itertools.dropwhile(assigning.match, words)) for words in commands + [words]]
    return [words for words in commands if words]


@pytest.mark.parametrize("page", ["centre.md", "quickstart.md"])
def test_every_command_line_of_a_newcomers_page_is_accepted(page):
    checked = 0
    for block in console_blocks(DOCS / page):
        for words in command_lines(block):
            if words[0] == "bin/climstack":
                errors = io.StringIO()
                with contextlib.redirect_stderr(errors), contextlib.suppress(SystemExit):
                    checked += bool(parser().parse_args(words[1:]))
                assert not errors.getvalue(), f"{page}: {shlex.join(words)}\n{errors.getvalue()}"
            elif words[0] == "bin/setup":  # what bin/setup hands climstack.setup
                _, site = climstack_setup.where(["--at", "local", *words[1:]])
                assert (PROJECT_ROOT / "environments" / (site or "local")).is_dir(), words
                checked += 1
    assert checked >= 5, f"{page}: only {checked} command lines found"


#: a block of a page that is a command's output: `<!-- output of: CMD -->`, the output, then
#: `<!-- end of output -->`; CMD runs from the project root (its records committed)
OUTPUT = re.compile(r"<!-- output of: (.+?) -->\n(.*?)\n<!-- end of output -->", re.DOTALL)


def output_blocks() -> list[tuple[str, str, str]]:
    return [
        (page.name, found.group(1), found.group(2))
        for page in sorted((PROJECT_ROOT / "docs").glob("*.md"))
        for found in OUTPUT.finditer(page.read_text())
    ]


def test_the_mpi_abi_page_shows_its_tables_as_a_command_printed_them():
    assert any(
        page == "mpi-abi.md" and "bench abi --report" in c for page, c, _ in output_blocks()
    )


@pytest.mark.parametrize("page,command,shown", output_blocks(), ids=lambda v: str(v)[:40])
def test_every_table_marked_as_output_is_what_its_command_prints(page, command, shown):
    """The command, run now on the committed record, prints the block as the page shows it:
    no cell edited by hand, none left behind by a change of the code that writes it."""
    argv = shlex.split(command)
    assert argv[0] == "climstack", f"{page}: {command}: a climstack command"
    proc = subprocess.run(
        [str(PROJECT_ROOT / "bin" / "climstack"), *argv[1:]],
        capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert shown.strip() == proc.stdout.strip(), f"{page}: `{command}` prints otherwise"
