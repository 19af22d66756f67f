"""The layering of docs/architecture.md, checked on the code's imports: a package of
climstack/ imports only from its own layer and the layers below it, the product never
imports the test support, only the process runner starts processes, and only the Spack
gateway names Spack's entry point or starts `spack python`."""

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
    ("bench.host_builds",),  # the benchmark wing, one room a layer: our packages built by
    # Spack against this machine's host MPIs,
    ("bench.results",),  # a run's output read,
    ("bench.model",),  # a model's case and the bit-for-bit check,
    ("bench.run",),  # the modes and the run matrix, run here or as a job script,
    ("bench.report",),  # the statistics and the report,
    ("bench.precise",),  # the precise profile: its runs, stopping rule and controls,
    ("bench.abi",),  # the MPI-5 standard ABI lane,
    ("bench.suite",),  # MPICH's own test suite,
    ("bench.scale",),  # start-up and memory as ranks grow
    ("cli", "setup", "__main__", "workflow"),
)
#: folders cut into rooms of their own: each sub-package is a layer (bench.run, ...)
ROOMED = ("bench",)
RANK = {part: rank for rank, layer in enumerate(LAYERS) for part in layer}
RANK |= {
    folder: min(r for p, r in RANK.items() if p.startswith(f"{folder}.")) for folder in ROOMED
}
#: the only modules that may start processes (the runner) or name Spack's entry point
PROCESS_RUNNER = {"common/process.py"}
SPACK_GATEWAY = {"spack/__init__.py"}
#: what runs a Spack command: the gateway's run and stream (of a Spack, a Centre, conftest's)
SPACK_RUNNERS = {"run", "stream", "run_spack"}


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
    """climstack.bind.plan -> bind; climstack.errors -> errors; climstack -> '';
    climstack.bench.run.jobs -> bench.run (a room of a ROOMED folder)."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] in ROOMED:
        return ".".join(parts[1:3])
    return parts[1] if len(parts) > 1 else ""


def test_every_part_of_the_package_has_a_layer():
    parts = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()}
    for folder in ROOMED:
        parts |= {
            f"{folder}.{p.stem if p.is_file() else p.name}" for p in (PACKAGE / folder).iterdir()
        }
    parts -= {"__init__", "__pycache__"} | {
        f"{f}.{n}" for f in ROOMED for n in ("__init__", "__pycache__")
    }
    assert parts == set(RANK), "add the new folder to LAYERS and to docs/architecture.md"


def test_no_package_imports_upward():
    upward = []
    for name, tree in modules().items():
        own = layer_of("climstack." + name.removesuffix(".py").replace("/", "."))
        own = own if own in RANK else name.split("/")[0]  # a ROOMED folder's __init__
        for module in imported(tree):
            if module.startswith("climstack.") and RANK.get(layer_of(module), -1) > RANK[own]:
                upward.append(f"climstack/{name} imports {module}")
    assert not upward, "\n".join(sorted(upward))


def test_the_product_never_imports_the_test_support():
    found = [
        f"climstack/{name} imports {module}"
        for name, tree in modules().items()
        for module in imported(tree)
        if module.split(".")[0] in ("climstack_dev", "tests", "conftest")
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


def callee(call: ast.Call) -> str:
    """spack.DEFAULT.run(...) -> run; run_spack(...) -> run_spack."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def starts_spack_python(node: ast.AST) -> bool:
    """Spack's `python` subcommand passed on: among the arguments of a run/stream, or after
    the first word of an argument list built anywhere (`[*GPG, "python", script]`)."""
    if isinstance(node, (ast.List, ast.Tuple)):
        words = node.elts[1:]
    elif isinstance(node, ast.Call) and callee(node) in SPACK_RUNNERS:
        words = [arg.value if isinstance(arg, ast.Starred) else arg for arg in node.args]
    else:
        return False
    return any(isinstance(word, ast.Constant) and word.value == "python" for word in words)


def python_sources() -> dict[str, ast.Module]:
    """Every module of the package but the gateway's, of the tests and of the benchmarks."""
    found = {
        f"climstack/{name}": tree
        for name, tree in modules().items()
        if name.split("/")[0] != "spack"
    }
    for folder in ("tests", "benchmarks"):
        for path in sorted((PROJECT_ROOT / folder).rglob("*.py")):
            found[str(path.relative_to(PROJECT_ROOT))] = ast.parse(path.read_text())
    return found


def test_only_the_gateway_starts_spack_python():
    """Scripts run in Spack's Python through Spack.python (climstack/spack/scripts/, or the
    tests' own by path), which parses their JSON: never `run("python", ...)` elsewhere."""
    found = [
        f"{name}:{node.lineno}"
        for name, tree in python_sources().items()
        for node in ast.walk(tree)
        if starts_spack_python(node)
    ]
    assert not found, f"use climstack.spack.Spack.python in: {', '.join(found)}"


def test_the_check_for_spack_python_sees_every_way_of_passing_it():
    def calls(source: str) -> bool:
        return any(starts_spack_python(node) for node in ast.walk(ast.parse(source)))

    assert calls('spack.run("python", "-c", code)')
    assert calls('a.run(*GPG, "python", str(script), env=e)')
    assert calls('run_spack("-C", scope, "python", script)')
    assert calls('centre.stream(*["-c", x, "python", s])')
    assert calls('process.run([str(SPACK), "python", script], "what")')
    assert calls('command = [*GPG, *options, "python", str(script)]')
    assert not calls('process.run(["python3", "-m", "x"], "what")')
    assert not calls('process.run(["python", "-m", "x"], "what")')  # not Spack's subcommand
    assert not calls('spack.DEFAULT.python("x.py", "python")')


#: modules with a command line of their own, outside climstack/cli/, and why
OWN_COMMAND_LINE = {
    "image/image_check.py": "runs inside the image, by the recipe (python3 -m ...)",
}


def test_the_command_line_lives_in_cli():
    found = [
        f"climstack/{name}"
        for name, tree in modules().items()
        if name.split("/")[0] not in ("cli", "__main__.py")
        and name not in OWN_COMMAND_LINE
        and (
            "argparse" in imported(tree)
            or any(isinstance(n, ast.FunctionDef) and n.name == "register" for n in tree.body)
        )
    ]
    assert not found, f"move the command line into climstack/cli/: {', '.join(found)}"
