"""The documentation: README.md stays short and its links resolve; the mkdocs site of docs/
builds with --strict (every link and anchor resolves, no page outside the nav), into a
temporary directory, never the checkout."""

import re
import subprocess

import yaml
from conftest import PROJECT_ROOT

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
