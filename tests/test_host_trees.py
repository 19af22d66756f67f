"""Partial, odd and hostile host trees for every reader of the host: the Cray PE reader and
`climstack drift`, and `climstack bind`'s MPI discovery, library families, plugin closure
and loader. Hypothesis (a kept library) generates trees from a real one by removing,
emptying, garbling and re-linking what is in it, and adding odd versions and `default`
links; each run must end within a bound with exit 0, 1 or 2, never a traceback, an error
must name a path and a fix, and nothing may be written on error."""

import contextlib
import io
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from climstack.__main__ import main
from climstack.common import process
from climstack.cray import drift
from climstack.errors import ClimstackError
from climstack.inputs import sites
from climstack_dev.cpe_tree import cpe_tree
from climstack_dev.cray_tree import cray_tree
from climstack_dev.examples import examples

BOUND_S = 30  # one reader's run on a small tree takes well under a second
#: small trees, few steps (climstack_dev.examples: the same examples every run)
EXAMPLES = examples(40)
#: module-environment variables discovery would read before the site scope
MODULE_ENVIRONMENT = ("CRAY_MPICH_DIR", "CRAY_MPICH_PREFIX", "MPICH_DIR", "I_MPI_ROOT", "PE_ENV")
ODD_VERSIONS = ("8.1.27.rc1", "default", "latest", "8..1", "9.0.1-beta", "0", "1.2.3.4.5.6.7")


def climstack(*argv) -> tuple[int, str, str]:
    """Run the CLI in-process (the site's Spack configuration is read once per process),
    stopped by SIGALRM after BOUND_S; (exit status, stdout, stderr)."""

    def too_long(*_):
        raise TimeoutError(f"climstack {' '.join(map(str, argv))} ran over {BOUND_S} s")

    out, err = io.StringIO(), io.StringIO()
    environ = {k: v for k, v in os.environ.items() if k not in MODULE_ENVIRONMENT}
    environ["LD_LIBRARY_PATH"] = ""
    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(BOUND_S)
    try:
        with mock.patch.dict(os.environ, environ, clear=True):
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                status = main([str(a) for a in argv])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return status, out.getvalue(), err.getvalue()


def assert_clean_outcome(status: int, stderr: str) -> None:
    assert status in (0, 1, 2), status
    if status == 2:
        message = stderr.partition("error: ")[2]
        assert "/" in message.partition("\n  fix:")[0], f"the error names no path: {stderr}"
        assert "\n  fix: " in message, f"the error gives no fix: {stderr}"


# -- the mutations ------------------------------------------------------------------------
def entries(root: Path) -> list[str]:
    """Every file, directory and link below root, relative, sorted (Hypothesis samples it)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def mutations(paths: list[str]):
    path = st.sampled_from(paths)
    return st.lists(
        st.one_of(
            st.tuples(st.just("remove"), path),
            st.tuples(st.just("empty"), path),
            st.tuples(st.just("garble"), path, st.binary(min_size=1, max_size=64)),
            st.tuples(st.just("dangle"), path),
            st.tuples(st.just("loop"), path),
            st.tuples(st.just("file_for_dir"), path),
            st.tuples(st.just("odd_version"), path, st.sampled_from(ODD_VERSIONS)),
            st.tuples(
                st.just("default_link"), path, st.sampled_from(("nowhere", "default", ".."))
            ),
        ),
        min_size=1,
        max_size=4,
    )


def _clear(target: Path) -> None:
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.exists() or target.is_symlink():
        target.unlink()


def mutate(root: Path, steps) -> None:
    """Apply the steps to the tree under root (a step whose path is gone does nothing)."""
    for kind, relative, *arguments in steps:
        target = root / relative
        if not (target.exists() or target.is_symlink()):
            continue
        directory = target if target.is_dir() and not target.is_symlink() else target.parent
        if kind == "remove":
            _clear(target)
        elif kind == "empty":
            was_dir = target.is_dir() and not target.is_symlink()
            _clear(target)
            target.mkdir() if was_dir else target.write_bytes(b"")
        elif kind == "garble":
            _clear(target)
            target.write_bytes(arguments[0])
        elif kind == "dangle":
            _clear(target)
            target.symlink_to("no-such-version")
        elif kind == "loop":
            _clear(target)
            target.symlink_to(target.name)
        elif kind == "file_for_dir" and target.is_dir() and not target.is_symlink():
            _clear(target)
            target.write_text("#%Module1.0\n")
        elif kind == "odd_version":
            (directory / arguments[0]).mkdir(exist_ok=True)
        elif kind == "default_link":
            _clear(directory / "default")
            (directory / "default").symlink_to(arguments[0])


@contextlib.contextmanager
def mutated_copy(base: Path, steps):
    work = Path(tempfile.mkdtemp(prefix="host-tree-"))
    try:
        root = work / "root"
        shutil.copytree(base, root, symlinks=True)
        mutate(root, steps)
        yield work, root
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- the trees ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pe_tree(tmp_path_factory) -> Path:
    """Two CPE releases with module tree and modulerc files (drift's reader)."""
    return cpe_tree(tmp_path_factory.mktemp("pe"), ("23.09", "25.03"), "25.03")


@pytest.fixture(scope="module")
def bind_tree(tmp_path_factory) -> Path:
    """An ARCHER2-like host: MPI, its closure, plugins and the I/O families (bind's readers)."""
    return cray_tree(tmp_path_factory.mktemp("cray"))


def prefixes_only(root: Path, site: str = "archer2") -> Path:
    """Every /opt/cray prefix of the site's externals, each with lib/ and lib64/, and
    nothing else: no module tree, no CPE release directory (a node image's /opt/cray)."""
    for _, external, _, _ in drift.pe_externals(sites.get(site)):
        for sub in ("lib", "lib64"):
            (root / external["prefix"].lstrip("/") / sub).mkdir(parents=True, exist_ok=True)
    return root


# -- the tree of the report: prefixes, no module tree, no CPE ------------------------------
def test_prefixes_without_module_tree_give_unknown_defaults_not_a_crash(tmp_path):
    root = prefixes_only(tmp_path / "root")
    status, out, err = climstack("drift", "archer2", "--root", root)
    assert status == 0, out + err
    assert "0 of 10 Cray PE externals drifted" in out
    mpich = next(line for line in out.splitlines() if line.split()[:1] == ["cray-mpich"])
    assert f"ok; default unknown: no module tree under {root}" in mpich
    assert "fix for unknown defaults: run drift on a login node" in out
    assert "default unknown)" in out.splitlines()[0]


def test_a_replaced_cray_mpich_is_drift_naming_both_versions(tmp_path):
    root = prefixes_only(tmp_path / "root")
    shutil.rmtree(root / "opt/cray/pe/mpich/8.1.27")
    (root / "opt/cray/pe/mpich/8.1.30/ofi/gnu/9.1/lib").mkdir(parents=True)
    status, out, err = climstack("drift", "archer2", "--root", root)
    assert status == 1, out + err
    mpich = next(line for line in out.splitlines() if line.split()[:1] == ["cray-mpich"])
    assert "prefix missing: /opt/cray/pe/mpich/8.1.27/ofi/gnu/9.1" in mpich
    assert "8.1.30" in mpich
    assert "1 of 10 Cray PE externals drifted" in out


def test_looping_default_links_terminate(pe_tree, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(pe_tree, root, symlinks=True)
    modules = root / "opt/cray/pe/modulefiles"
    for module in ("cpe", "cray-mpich"):
        (modules / module / "default").symlink_to("default")
        (modules / module / ".version").unlink(missing_ok=True)
    (root / "opt/cray/pe/cpe/default").symlink_to("default")
    status, out, err = climstack("drift", "archer2", "--root", root)
    assert status in (0, 1), out + err


# -- generated trees ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def pe_paths(pe_tree) -> list[str]:
    return entries(pe_tree)


@pytest.fixture(scope="module")
def bind_paths(bind_tree) -> list[str]:
    return entries(bind_tree)


#: what a module's directory, version file, `default` link and CPE modulerc may hold
MODULE_TEXT = {
    "tcl": "#%Module1.0\nsetenv CRAY_MPICH_DIR /opt/cray/pe/mpich/8.1.27/ofi/gnu/9.1\n",
    "lua": 'setenv("CRAY_MPICH_DIR", "/opt/cray/pe/mpich/8.1.27/ofi/gnu/9.1")\n',
    "empty": "",
    "not tcl": "set x {\n",
    "unparsable tcl": '#%Module1.0\nsetenv X "unterminated\n',
    "unset variable": "#%Module1.0\nsetenv CRAY_MPICH_DIR $NOWHERE/x\n",
}
VERSION_FILE = ("none", "valid", "empty", "garbage", "directory", "names a missing version")
DEFAULT_LINK = ("none", "valid", "dangling", "loop", "parent", "to a directory")
PE_MODULES = ("cpe", "cray-mpich", "cray-pmi", "cce", "libfabric")
CPE_RELEASES = ("23.09", "25.03", "default", "latest", "25.3")


@st.composite
def module_trees(draw) -> dict:
    """A module tree and CPE directory: each module present or not, with odd versions,
    modulefiles of every kind, and `.version` files and `default` links valid or broken."""
    versions = st.lists(
        st.sampled_from(("8.1.27", "8.1.30", "6.1.12", "23.09", "16.0.1", *ODD_VERSIONS)),
        max_size=3,
        unique=True,
    )
    modules = {
        name: {
            "versions": {
                v: draw(st.sampled_from((*MODULE_TEXT, "directory", "lua file")))
                for v in draw(versions)
            },
            "version_file": draw(st.sampled_from(VERSION_FILE)),
            "default": draw(st.sampled_from(DEFAULT_LINK)),
        }
        for name in draw(st.lists(st.sampled_from(PE_MODULES), unique=True, max_size=5))
    }
    releases = draw(st.lists(st.sampled_from(CPE_RELEASES), unique=True, max_size=3))
    return {
        "root": draw(
            st.sampled_from(("/opt/cray/pe/modulefiles", "/opt/cray/pe/lmod/modulefiles/core"))
        ),
        "modules": modules,
        "cpe": {
            r: draw(st.sampled_from((*MODULE_TEXT, "valid rc", "directory"))) for r in releases
        },
        "cpe_default": draw(st.sampled_from(DEFAULT_LINK)),
        "mpich_versions": draw(versions),
        "drop_pinned_mpich": draw(st.booleans()),
    }


def _default_link(directory: Path, kind: str, versions: list[str]) -> None:
    target = {
        "valid": versions[0] if versions else "8.1.27",
        "dangling": "no-such-version",
        "loop": "default",
        "parent": "..",
        "to a directory": ".",
    }.get(kind)
    link = directory / "default"
    if target and not (link.exists() or link.is_symlink()):  # a version may be named default
        directory.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)


def build_module_tree(root: Path, tree: dict) -> None:
    """Lay out what module_trees drew, over a tree of the site's prefixes."""
    for name, module in tree["modules"].items():
        directory = root / tree["root"].lstrip("/") / name
        directory.mkdir(parents=True, exist_ok=True)
        for version, kind in module["versions"].items():
            path = directory / (f"{version}.lua" if kind in ("lua", "lua file") else version)
            if kind == "directory":
                path.mkdir(exist_ok=True)
            else:
                path.write_text(MODULE_TEXT.get(kind, MODULE_TEXT["lua"]))
        known = list(module["versions"])
        text = {
            "valid": f'#%Module\nset ModulesVersion "{known[0] if known else "8.1.27"}"\n',
            "empty": "",
            "garbage": "\x00\xff\xfe ModulesVersion",
            "names a missing version": '#%Module\nset ModulesVersion "0.0.0"\n',
        }.get(module["version_file"])
        if module["version_file"] == "directory":
            (directory / ".version").mkdir()
        elif text is not None:
            (directory / ".version").write_bytes(text.encode("utf-8", "surrogateescape"))
        _default_link(directory, module["default"], known)
    cpe = root / "opt/cray/pe/cpe"
    for release, kind in tree["cpe"].items():
        (cpe / release).mkdir(parents=True, exist_ok=True)
        rc = cpe / release / "modulerc.lua"
        if kind == "directory":
            rc.mkdir()
        else:
            rc.write_text(
                'module_version("cray-mpich/8.1.30","default")\n'
                if kind == "valid rc"
                else MODULE_TEXT[kind]
            )
    _default_link(cpe, tree["cpe_default"], list(tree["cpe"]))
    mpich = root / "opt/cray/pe/mpich"
    if tree["drop_pinned_mpich"]:
        shutil.rmtree(mpich / "8.1.27", ignore_errors=True)
    for version in tree["mpich_versions"]:
        (mpich / version / "ofi/gnu/9.1/lib").mkdir(parents=True, exist_ok=True)


@pytest.fixture(scope="module")
def prefixes(tmp_path_factory) -> Path:
    return prefixes_only(tmp_path_factory.mktemp("prefixes") / "root")


def assert_drift_ends_cleanly(work: Path, root: Path) -> None:
    """drift with a proposal to write: a clean outcome, and no proposal written on error."""
    proposal = work / "proposal.diff"
    status, _, err = climstack("drift", "archer2", "--root", root, "--write", proposal, "--no-dag")
    assert_clean_outcome(status, err)
    if status == 2:
        assert not proposal.exists(), "a failed drift wrote its proposal"


def test_drift_on_generated_module_trees(prefixes):
    @EXAMPLES
    @given(tree=module_trees())
    def drift_ends_cleanly(tree):
        with mutated_copy(prefixes, []) as (work, root):
            build_module_tree(root, tree)
            assert_drift_ends_cleanly(work, root)

    drift_ends_cleanly()


def test_drift_on_mutated_release_trees(pe_tree, pe_paths):
    @EXAMPLES
    @given(steps=mutations(pe_paths))
    def drift_ends_cleanly(steps):
        with mutated_copy(pe_tree, steps) as (work, root):
            assert_drift_ends_cleanly(work, root)

    drift_ends_cleanly()


def test_bind_on_generated_trees(bind_tree, bind_paths):
    @EXAMPLES
    @given(
        steps=mutations(bind_paths),
        mode=st.sampled_from(("bind", "fabric")),
        families=st.sampled_from((None, "netcdf,hdf5")),
        flavour=st.sampled_from((None, "cray")),
    )
    def bind_ends_cleanly(steps, mode, families, flavour):
        with mutated_copy(bind_tree, steps) as (work, root):
            out = work / "plan"
            argv = ["bind", "archer2", "--root", root, "--out", out, "--format", "json"]
            argv += ["--mode", mode] + (["--with", families] if families else [])
            argv += ["--flavour", flavour] if flavour else []
            status, _, err = climstack(*argv)
            assert_clean_outcome(status, err)
            if status == 2:
                assert not out.exists(), "a failed bind left a plan directory"

    bind_ends_cleanly()


# -- a child that hangs printing nothing ----------------------------------------------------
@pytest.mark.parametrize("runner", [process.run, process.stream])
def test_a_silent_hanging_child_is_stopped_at_its_timeout(runner):
    start = time.monotonic()
    with pytest.raises(ClimstackError) as raised:
        # the child's own child keeps the output pipe open: the whole group is stopped
        runner(["sh", "-c", "sleep 60 & sleep 60"], "a silent child", timeout=1)
    took = time.monotonic() - start
    assert took < 10, f"stopped after {took:.1f} s, not at its 1 s timeout"
    message = str(raised.value)
    assert "a silent child: `sh -c sleep 60 & sleep 60 ...` still running after 1 s" in message
    assert "stopped" in message and "fix: " in message


def test_every_child_has_a_user(monkeypatch):
    """ch-run and Apptainer refuse to start without USER; the runner sets it once for all."""
    monkeypatch.delenv("USER", raising=False)
    assert process.run(["sh", "-c", 'echo "$USER"'], "a child").stdout.strip()
