"""The layering of docs/architecture.md, checked on the code's imports: a package of
climstack/ imports only from its own layer and the layers below it, the product never
imports the test support, and only the process runner starts processes."""

import ast
import re

from conftest import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "climstack"
#: bottom to top; a layer may import from itself and the layers listed before it
LAYERS = (
    ("errors", "pins", "common"),
    ("spack",),
    ("inputs",),
    ("cray",),
    ("bind",),
    ("stack",),
    ("launch",),
    ("image",),
    ("check",),
    ("jobs",),
    ("bench",),
    ("cli", "setup", "__main__"),
)
RANK = {part: rank for rank, layer in enumerate(LAYERS) for part in layer}
#: the only modules that may start processes (the runner) or name Spack's entry point
PROCESS_RUNNER = {"common/process.py"}
SPACK_GATEWAY = {"spack/__init__.py"}


def modules() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(PACKAGE)): ast.parse(path.read_text())
        for path in sorted(PACKAGE.rglob("*.py"))
        if "scripts" not in path.relative_to(PACKAGE).parts  # run inside Spack, by path
    }


def imported(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


def layer_of(module: str) -> str:
    """climstack.bind.plan -> bind; climstack.errors -> errors; climstack -> ''."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_part_of_the_package_has_a_layer():
    parts = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()}
    parts -= {"__init__", "__pycache__"}
    assert parts == set(RANK), "add the new folder to LAYERS and to docs/architecture.md"


def test_no_package_imports_upward():
    upward = []
    for name, tree in modules().items():
        own = name.split("/")[0].removesuffix(".py")
        for module in imported(tree):
            if module.startswith("climstack.") and RANK.get(layer_of(module), -1) > RANK[own]:
                upward.append(f"climstack/{name} imports {module}")
    assert not upward, "\n".join(sorted(upward))


def test_the_product_never_imports_the_test_support():
    found = [
        f"climstack/{name} imports {module}"
        for name, tree in modules().items()
        for module in imported(tree)
        if module.split(".")[0] in ("support", "tests", "conftest")
    ]
    assert not found, "\n".join(found)


def test_only_the_process_runner_starts_processes():
    found = [
        f"climstack/{name}"
        for name, tree in modules().items()
        if "subprocess" in imported(tree) and name not in PROCESS_RUNNER
    ]
    assert not found, f"use climstack.common.process in: {', '.join(found)}"


def test_only_the_gateway_knows_where_spack_is():
    """bin/spack is named in one place (climstack.spack.SPACK), not joined again elsewhere."""
    joined = re.compile(r"""["']bin["']\s*/\s*["']spack["']|/bin/spack\b""")
    found = [
        f"climstack/{name}"
        for name in modules()
        if name not in SPACK_GATEWAY and joined.search((PACKAGE / name).read_text())
    ]
    assert not found, f"use climstack.spack.SPACK in: {', '.join(found)}"
