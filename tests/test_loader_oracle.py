"""The loader model against the real loader: Hypothesis draws link layouts (chains of
libraries with DT_RPATH, DT_RUNPATH or neither, $ORIGIN, $LIB and $PLATFORM (both forms,
and a $ of no token), copies of one library in several directories, hwcaps subdirectories
among them, the image's default directory and a directory of its ld.so.conf, cached by
ldconfig or not, each with glibc-hwcaps subdirectories (x86-64-v2 to v4: those this CPU
lacks are not searched) and the cached one with the legacy tls and platform ones, SONAMEs
behind symlinks, NODEFLIB objects, a bound host directory, LD_LIBRARY_PATH with the tokens
and empty entries, each remedy), patchelf shapes them from objects gcc built once, and for
every example the model's link map must equal the list the image's own ld.so prints under
Charliecloud.

Each CI run draws new layouts from a fresh seed (CLIMSTACK_LOADER_SEED replays one; a
failure prints it); every layout the real ld.so ever disagreed on is kept below (FOUND)
as a fixed example. Then: verify's oracle refuses when the model is wrong."""

import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import example, given, seed, settings
from hypothesis import strategies as st

from climstack.bind import elf, loader
from climstack.check import oracle
from climstack_dev import programs
from climstack_dev.examples import examples

IMAGE_DIR, HOST_DIR = "/t", "/h"  # the image's own tree and a bound host directory
CACHED_DIR = "/c"  # the image's, listed in its ld.so.conf (ldconfig run or not)
DEFAULT_DIR = "/usr/lib/x86_64-linux-gnu"  # the image's system search path (and /lib/...)
# hwcaps subdirectories glibc 2.36 searches: glibc-hwcaps/x86-64-v2 (and v3, v4 where the
# CPU has them) and the legacy tls and platform ones, under searched, cached and default
# directories; <LIB>, <PLATFORM>: what the image's ld.so expands $LIB, $PLATFORM to (world:
# lib/x86_64-linux-gnu; x86_64, or haswell on an Intel AVX2 CPU); "$LIBx" is no token
DIRS = ("/t/d0", "/t/d1", "/h/d2", "/t/d0/glibc-hwcaps/x86-64-v2", "/t/d1/tls", "/t/<LIB>",
        "/h/<PLATFORM>", "/t/$LIBx", CACHED_DIR, "/c/glibc-hwcaps/x86-64-v2",
        "/c/glibc-hwcaps/x86-64-v3", "/c/tls", "/c/<PLATFORM>", DEFAULT_DIR,
        f"{DEFAULT_DIR}/glibc-hwcaps/x86-64-v2",
        "/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v4")  # fmt: skip
SEARCHED = ("/t/d0", "/t/d1", "/h/d2")  # directories a search path names
ENTRIES = (*SEARCHED, "$ORIGIN/../d1", "$ORIGIN", "/t/$LIB", "$ORIGIN/../${LIB}",
           "/h/${PLATFORM}", "/t/$LIBx")  # fmt: skip
PATH_ENTRIES = (*SEARCHED, "", "$ORIGIN/../d0", "/t/${LIB}", "/h/$PLATFORM", CACHED_DIR)
WORKING_DIR = "/t/d1"
NAMES = ("liba.so", "libb.so", "libmpi.so.12")
PROGRAM = "/t/bin/prog"
INTERPRETER = "/lib64/ld-linux-x86-64.so.2"
SEED = int(os.environ.get("CLIMSTACK_LOADER_SEED") or random.randrange(2**32))
EXAMPLES = settings(examples(200), derandomize=False)

needs_tools = pytest.mark.skipif(
    not all(map(shutil.which, ("ch-run", "gcc", "patchelf", "mmdebstrap", "ldconfig"))),
    reason="needs ch-run, gcc, patchelf, mmdebstrap and ldconfig (bin/setup installs them)",
)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The Debian image (hard-linked; ldconfig replaces, never rewrites, its files), the
    two trees bound into it, the cached directory in its ld.so.conf, the objects gcc
    builds once: a program and a library that call nothing, and an MPI library stub, each
    also with DF_1_NODEFLIB; and what its ld.so expands $LIB and $PLATFORM to."""
    work = tmp_path_factory.mktemp("oracle")
    image = work / "image"
    subprocess.run(["cp", "-al", str(programs.base_image()), str(image)], check=True)
    for point in (IMAGE_DIR, HOST_DIR, CACHED_DIR):
        (image / point.lstrip("/")).mkdir()
    (image / "etc/ld.so.conf.d/zz-climstack.conf").write_text(f"{CACHED_DIR}\n")
    shutil.copy2(image / "etc/ld.so.cache", work / "image-ld.so.cache")
    sources = work / "src"
    sources.mkdir()
    (sources / "main.c").write_text("int main(void) { return 0; }\n")
    (sources / "lib.c").write_text("int plain(void) { return 1; }\n")
    (sources / "mpi.c").write_text("int MPI_Init(int *c, char ***v) { return 0; }\n")
    built = {}
    for name, flags in (
        ("main", []),
        ("lib", ["-shared", "-fPIC"]),
        ("mpi", ["-shared", "-fPIC"]),
    ):
        for nodeflib in (False, True):
            key = (name, nodeflib)
            built[key] = sources / f"{name}{'-nodeflib' * nodeflib}"
            extra = ["-Wl,-z,nodefaultlib"] if nodeflib else []
            source = str(sources / f"{name}.c")
            subprocess.run(["gcc", *flags, *extra, "-o", str(built[key]), source], check=True)
            assert elf.read(built[key]).nodeflib == nodeflib
    return image, work / "t", work / "h", built, expansions(image)


def expansions(image: Path) -> dict[str, str]:
    """<LIB> and <PLATFORM>: what the image's ld.so, run in it, expands $LIB and $PLATFORM
    to (LD_DEBUG=libs of a search for a library that is nowhere; the model asks it alone)."""
    argv = [INTERPRETER, "--library-path", "/@/$LIB/@/$PLATFORM/@", "--list", INTERPRETER]
    proc = subprocess.run(
        ["ch-run", "--env-no-expand", "--set-env=LD_DEBUG=libs",
         "--set-env=LD_PRELOAD=libclimstack-nowhere.so", str(image), "--", *argv],
        capture_output=True, text=True, timeout=60,
        env={"PATH": os.environ["PATH"], "USER": "root", "HOME": "/root"},
    )  # fmt: skip
    found = re.search(r"[=:]/@/([^:]+)/@/([^:/]+)/@\s+\(--library-path\)", proc.stderr)
    assert found, proc.stderr
    return {"<LIB>": found[1], "<PLATFORM>": found[2]}


def placed(world, path: str) -> str:
    """A layout's path with <LIB> and <PLATFORM> as the image's ld.so expands them."""
    for mark, value in world[4].items():
        path = path.replace(mark, value)
    return path


def dynamic():
    """(kind, entries): no search path, DT_RPATH or DT_RUNPATH over some ENTRIES (with
    $LIB, $PLATFORM, ${LIB}, ${PLATFORM} left for ld.so to expand)."""
    return st.tuples(
        st.sampled_from(("", "rpath", "runpath")),
        st.lists(st.sampled_from(ENTRIES), min_size=1, max_size=3, unique=True),
    )


@st.composite
def layouts(draw):
    """Where each library has copies (with their own NEEDED, search paths, SONAME, a file
    behind a SONAME symlink, NODEFLIB), what the program needs (and its NODEFLIB),
    LD_LIBRARY_PATH, the remedy, and whether ldconfig cached the image's directories."""
    copies = {}
    for index, name in enumerate(NAMES):
        later = list(NAMES[index + 1 :])  # a DAG: a library needs only later names
        for directory in draw(st.lists(st.sampled_from(DIRS), max_size=2, unique=True)):
            needed = draw(st.lists(st.sampled_from(later), unique=True)) if later else []
            copies[f"{directory}/{name}"] = (
                needed, draw(dynamic()), draw(st.booleans()), draw(st.booleans()),
                draw(st.booleans()),
            )  # fmt: skip
    program = (
        draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True)),
        draw(dynamic()),
        draw(st.booleans()),
    )
    path = draw(st.lists(st.sampled_from(PATH_ENTRIES), max_size=3))
    remedies = ["", "inhibit"] + [f"preload:{p}" for p in sorted(copies)]
    return copies, program, path, draw(st.sampled_from(remedies)), draw(st.booleans())


def shape(source: Path, target: Path, needed, search, soname: str = "") -> None:
    """A copy of `source` at `target` with these DT_NEEDED, search path and SONAME, read
    back to be sure (patchelf 0.14 garbles the strings when one call does several)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, target)
    kind, entries = search
    calls = [["--set-soname", soname]] if soname else []
    if kind:
        calls.append(["--set-rpath", ":".join(entries)] + (["--force-rpath"] * (kind == "rpath")))
    if needed:
        calls.append([arg for name in needed for arg in ("--add-needed", name)])
    for args in calls:
        subprocess.run(["patchelf", *args, str(target)], check=True, capture_output=True)
    info = elf.read(target)
    assert info.soname == soname and set(needed) <= set(info.needed)
    assert (info.rpath, info.runpath) == (
        list(entries) if kind == "rpath" else [],
        list(entries) if kind == "runpath" else [],
    )


def build(world, layout) -> None:
    """The layout's files in the trees, the image's cached and default directories and
    their hwcaps subdirectories (what the last example left there removed), and the image's
    ld.so.cache made anew by ldconfig (`cached`) or left as the image has it (the cached
    directory then missed)."""
    image, tree, host, built, _ = world
    for root in (tree, host, image / CACHED_DIR.lstrip("/")):
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
    (tree / WORKING_DIR[len(IMAGE_DIR) + 1 :]).mkdir()  # ch-run starts in it
    for directory in DIRS:
        if not directory.startswith((IMAGE_DIR, HOST_DIR, CACHED_DIR)):  # the image's own
            for name in NAMES:
                for leftover in (image / directory.lstrip("/")).glob(f"{name}*"):
                    leftover.unlink()
    copies, (needed, search, *program), _, _, *cached = layout
    where = {IMAGE_DIR: tree, HOST_DIR: host}
    for path, (deps, lib_search, has_soname, *more) in copies.items():
        symlinked, nodeflib = (more + [False, False])[:2]
        path = placed(world, path)
        top = "/" + path.split("/")[1]
        name = path.rsplit("/", 1)[1]
        source = built[("mpi" if name.startswith("libmpi") else "lib", nodeflib)]
        target = where[top] / path[len(top) + 1 :] if top in where else image / path[1:]
        if symlinked:  # the file is NAME.0.0; NAME a symlink to it, as ldconfig makes it
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(f"{name}.0.0")
            target = target.with_name(f"{name}.0.0")
        shape(source, target, deps, lib_search, name if has_soname else "")
    shape(built[("main", bool(program and program[0]))], tree / PROGRAM[len(IMAGE_DIR) + 1 :],
          needed, search)  # fmt: skip
    cache = image / "etc/ld.so.cache"
    if cached and cached[0]:
        subprocess.run(["ldconfig", "-X", "-r", str(image)], check=True, capture_output=True)
    else:  # the image's own cache, which knows nothing of the cached directory's files
        cache.unlink()
        shutil.copy2(world_cache(world), cache)


def world_cache(world) -> Path:
    """The image's ld.so.cache as it came (world keeps a copy)."""
    return world[1].parent / "image-ld.so.cache"


def real_loader(world, layout) -> dict:
    """What the image's ld.so lists, run in the image under Charliecloud."""
    image, tree, host, _, _ = world
    path, remedy = layout[2], placed(world, layout[3])
    binds = [f"--bind={tree}:{IMAGE_DIR}", f"--bind={host}:{HOST_DIR}"]
    joined = ":".join(path)
    env = [f"--set-env=LD_LIBRARY_PATH={joined}"] if path else []
    if remedy == "inhibit":
        argv = [INTERPRETER, "--list", "--inhibit-rpath", "", "--library-path", joined,
                PROGRAM]  # fmt: skip
    elif remedy.startswith("preload:"):
        argv = [INTERPRETER, "--list", "--preload", remedy.split(":", 1)[1], PROGRAM]
    else:
        argv = [PROGRAM]
        env.append("--set-env=LD_TRACE_LOADED_OBJECTS=1")
    proc = subprocess.run(
        # the variables as given: ch-run would expand $ORIGIN as one of its own
        [
            "ch-run",
            "--env-no-expand",
            *binds,
            *env,
            f"--cd={WORKING_DIR}",
            str(image),
            "--",
            *argv,
        ],  # fmt: skip
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "USER": "root", "HOME": "/root"},
        timeout=60,
    )
    return oracle.listing(proc.stdout, proc.stderr)


def model(world, layout) -> tuple[loader.Closure, loader.View]:
    image, tree, host, _, _ = world
    path, remedy = layout[2], placed(world, layout[3])
    view = loader.View(image, {IMAGE_DIR: tree, HOST_DIR: host})
    preload = [remedy.split(":", 1)[1]] if remedy.startswith("preload:") else []
    closure = loader.closure(
        PROGRAM, view, path, preload=preload, inhibit=remedy == "inhibit", cwd=WORKING_DIR
    )
    return closure, view


#: layouts the model before 2026-11-27 got wrong (checked against ld.so here), kept as
#: fixed examples; add every counterexample Hypothesis ever finds
FOUND = [
    # a library's DT_RPATH is searched after its loader's: the model had the chain reversed
    (
        {
            "/t/d0/liba.so": (["libb.so"], ("rpath", ["/t/d1"]), True),
            "/t/d1/libb.so": (["libmpi.so.12"], ("", ["/t/d0"]), True),
            "/t/d0/libmpi.so.12": ([], ("", ["/t/d0"]), True),
            "/t/d1/libmpi.so.12": ([], ("", ["/t/d0"]), True),
        },
        (["liba.so"], ("rpath", ["/t/d0"])),
        [],
        "",
    ),
    # --inhibit-rpath '' drops the program's DT_RUNPATH too: liba.so is then not found
    (
        {"/t/d0/liba.so": ([], ("", ["/t/d0"]), True)},
        (["liba.so"], ("runpath", ["/t/d0"])),
        [],
        "inhibit",
    ),  # fmt: skip
    # a preloaded library whose SONAME is not the name a program asks for is loaded again
    (
        {
            "/h/d2/libmpi.so.12": ([], ("", ["/t/d0"]), False),
            "/t/d0/libmpi.so.12": ([], ("", ["/t/d0"]), True),
        },  # fmt: skip
        (["libmpi.so.12"], ("rpath", ["/t/d0"])),
        ["/h/d2"],
        "preload:/h/d2/libmpi.so.12",
    ),
    # 2026-11-28, the model fed what glibc reads: a NODEFLIB program finds no libc.so.6
    # (its cache entry is in a system directory, and the system directories are skipped)
    (
        {"/t/d0/liba.so": ([], ("", ["/t/d0"]), False, False, False)},
        (["liba.so"], ("rpath", ["/t/d0"]), True),
        [],
        "preload:/t/d0/liba.so",
        False,
    ),
    # ... but it takes a cache entry outside them (the model had skipped the whole cache)
    (
        {"/c/libb.so": ([], ("", ["/t/d0"]), False, False, False)},
        (["libb.so"], ("", ["/t/d0"]), True),
        [],
        "",
        True,
    ),
    # an empty LD_LIBRARY_PATH entry is the working directory, named relative by ld.so
    (
        {"/t/d1/liba.so": ([], ("", ["/t/d0"]), False, False, False)},
        (["liba.so"], ("", ["/t/d0"]), False),
        ["/t/d0", ""],
        "",
        False,
    ),
    # $ORIGIN in LD_LIBRARY_PATH is the program's directory
    (
        {"/t/d0/liba.so": ([], ("", ["/t/d0"]), False, False, False)},
        (["liba.so"], ("", ["/t/d1"]), False),
        ["$ORIGIN/../d0"],
        "",
        False,
    ),
    # a name the program does not find and a later library does (its DT_RPATH): ld.so's
    # trace lists it found; the model had listed it not found (a fresh seed's first catch)
    (
        {
            "/t/d0/libb.so": ([], ("", ["/t/d0"]), False, False, False),
            "/usr/lib/x86_64-linux-gnu/libb.so": (
                ["libmpi.so.12"],
                ("rpath", ["/t/d0"]),
                False,
                False,
                False,
            ),
            "/t/d0/libmpi.so.12": ([], ("", ["/t/d0"]), False, False, False),
        },  # fmt: skip
        (["libb.so", "libmpi.so.12"], ("", ["/t/d0"]), False),
        [],
        "",
        False,
    ),
    # a library only in the image's ld.so.conf directory, not cached: glibc misses it
    (
        {"/c/libmpi.so.12": ([], ("", ["/t/d0"]), True, True, False)},
        (["libmpi.so.12"], ("", ["/t/d0"]), False),
        [],
        "",
        False,
    ),
    # 2026-11-29, $LIB, $PLATFORM and hwcaps reached: $LIBx is no token (glibc's is_dst:
    # a name followed by a character of an identifier), the directory of that very name
    (
        {"/t/$LIBx/liba.so": ([], ("", ["/t/d0"]), False, False, False)},
        (["liba.so"], ("runpath", ["/t/$LIBx"]), False),
        [],
        "",
        False,
    ),
    # a cache entry of a legacy hwcap subdirectory (tls) of a cached directory: ld.so takes
    # it before the directory's own; the model had dropped every legacy entry
    (
        {
            "/c/tls/liba.so": ([], ("", ["/t/d0"]), False, False, False),
            "/c/liba.so": ([], ("", ["/t/d0"]), False, False, False),
        },
        (["liba.so"], ("", ["/t/d0"]), False),
        [],
        "",
        True,
    ),
    # ... and of the platform's one (x86_64 is ldconfig's hwcap bit 1, haswell bit 50)
    (
        {
            "/c/<PLATFORM>/liba.so": ([], ("", ["/t/d0"]), False, False, False),
            "/c/liba.so": ([], ("", ["/t/d0"]), False, False, False),
        },
        (["liba.so"], ("", ["/t/d0"]), False),
        [],
        "",
        True,
    ),
    # two cache entries of one glibc-hwcaps level (x86-64-v2) in two directories: ld.so
    # takes the first in the cache's order; the model's first rewrite for legacy entries
    # had taken the least path (seed 2635673492)
    (
        {
            "/usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v2/libb.so": (
                [],
                ("", ["/t/d0"]),
                False,
                False,
                False,
            ),
            "/c/glibc-hwcaps/x86-64-v2/libb.so": ([], ("", ["/t/d0"]), False, False, False),
        },
        (["libb.so"], ("", ["/t/d0"]), False),
        [],
        "",
        True,
    ),
]


@needs_tools
@seed(SEED)
@EXAMPLES
@given(layout=layouts())
@example(layout=FOUND[0])
@example(layout=FOUND[1])
@example(layout=FOUND[2])
@example(layout=FOUND[3])
@example(layout=FOUND[4])
@example(layout=FOUND[5])
@example(layout=FOUND[6])
@example(layout=FOUND[7])
@example(layout=FOUND[8])
@example(layout=FOUND[9])
@example(layout=FOUND[10])
@example(layout=FOUND[11])
@example(layout=FOUND[12])
def test_the_model_link_map_is_the_image_loader_list(world, layout):
    build(world, layout)
    ours, view = model(world, layout)
    found = oracle.differences(ours, real_loader(world, layout), view)
    assert found == [], f"seed {SEED} (CLIMSTACK_LOADER_SEED={SEED} replays it): {layout}"


@needs_tools
def test_a_wrong_model_is_refused_naming_both_answers(world, monkeypatch):
    """The oracle's disagreement path: a model that searches LD_LIBRARY_PATH first (wrong
    for a DT_RPATH program) must be refused by the comparison, never said to agree."""
    copies, program, _, _ = FOUND[0]
    layout = (copies, program, ["/t/d0"], "")  # the chain's /t/d1 first, then /t/d0
    build(world, layout)
    listed = real_loader(world, layout)
    _, view = model(world, layout)
    right = loader.closure(PROGRAM, view, ["/t/d0"])
    assert oracle.differences(right, listed, view) == []
    original = loader.search_order

    def ld_library_path_first(requester, root, rules, view):
        order = original(requester, root, rules, view)
        return sorted(order, key=lambda entry: entry[1] != "LD_LIBRARY_PATH")

    monkeypatch.setattr(loader, "search_order", ld_library_path_first)
    wrong = loader.closure(PROGRAM, view, ["/t/d0"])
    lines = oracle.differences(wrong, listed, view)
    assert lines == [
        "libmpi.so.12: the model says /t/d0/libmpi.so.12, ld.so /t/d1/libmpi.so.12"
    ], lines
