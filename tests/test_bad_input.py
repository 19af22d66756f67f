"""Bad input for every command, run as a user runs it (bin/climstack): exit code 2, one
message naming what is wrong, a fix, no traceback, and nothing written. Each refusal has a
control where the same command with good input goes further (or succeeds)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

CLIMSTACK = str(PROJECT_ROOT / "bin" / "climstack")


def climstack(*args, env=None, timeout=300) -> subprocess.CompletedProcess:
    environ = {**os.environ, "LD_LIBRARY_PATH": "", **(env or {})}
    return subprocess.run(
        [CLIMSTACK, *map(str, args)], capture_output=True, text=True, env=environ, timeout=timeout
    )


def refused(*args, wrong=(), fix=(), env=None) -> str:
    """Run a command that must be refused; `wrong` must be in the message, `fix` in its fix."""
    proc = climstack(*args, env=env)
    message = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout, message)
    command = " ".join(map(str, args[:2])) if args[0] == "dev" else args[0]  # dev smoke
    assert message.startswith(f"climstack {command}: error: "), message
    assert "Traceback" not in message and "\n  fix: " in message, message
    what, advice = message.split("\n  fix: ", 1)
    assert advice.strip(), message
    for text in wrong:
        assert text in what, (text, message)
    for text in fix:
        assert text in advice, (text, message)
    return message


def env_dir(tmp_path: Path, body: str, name: str = "env") -> Path:
    directory = tmp_path / name
    directory.mkdir(parents=True)
    (directory / "spack.yaml").write_text(f"spack:\n{body}")
    return directory


STACK = f"  include:\n  - {PROJECT_ROOT}/environments/stack.yaml\n"


# --- concretize, named-env, smoke --------------------------------------------------------


@pytest.mark.parametrize(
    "command", ["concretize", "dev smoke", "install", "check-mpi", "containerize"]
)
def test_unknown_environment_names_the_real_ones(command):
    refused(
        *command.split(),
        "nosuch",
        wrong=["no environment 'nosuch'"],
        fix=["archer2, frontier, gaea-c5, gaea-c6, local, local-cce, lumi, perlmutter, setonix"],
    )


def test_named_env_unknown_environment():
    refused(
        "named-env", "x", "nosuch", wrong=["no environment 'nosuch'"], fix=["container-gaea-c6"]
    )


def test_concretize_and_named_env_refuse_an_environment_without_a_site(tmp_path):
    env = env_dir(tmp_path, STACK + "  specs: [zlib]\n")
    for args in (("concretize", env), ("named-env", "climstack-test-nosite", env)):
        refused(*args, wrong=[str(env / "spack.yaml"), "exactly one site"], fix=["../../site/"])


def test_concretize_names_an_unknown_site(tmp_path):
    env = env_dir(tmp_path / "environments", STACK + "  - ../../site/archer3\n")
    refused("concretize", env, wrong=["site 'archer3'"], fix=["archer2", "site/archer3/"])


def test_smoke_refuses_zero_ranks_and_a_bad_environment(tmp_path):
    refused("dev", "smoke", "--ranks", "0", wrong=["--ranks 0"], fix=["--ranks 2"])
    env = env_dir(tmp_path, STACK + "  specs: [zlib]\n")
    refused("dev", "smoke", env, wrong=["exactly one site"], fix=["../../site/"])
    refused("install", env, wrong=["exactly one site"], fix=["../../site/"])


# --- containerize, check-mpi, image ------------------------------------------------------


@pytest.mark.parametrize("command", ["containerize", "check-mpi", "image", "dev container-smoke"])
def test_a_site_environment_is_no_container(command):
    refused(
        *command.split(),
        "local",
        wrong=["environments/local/spack.yaml is a site environment"],
        fix=["give the image's container environment: containers/archer2"],
    )


def test_container_smoke_refuses_a_single_rank():
    refused("dev", "container-smoke", "--ranks", "1", wrong=["--ranks 1"], fix=["--ranks 2"])


def test_a_check_by_its_old_name_names_its_new_one():
    """The project's own checks moved under `climstack dev` (climstack --help lists the
    user's commands first): the old name says where."""
    refused("smoke", "local", wrong=["one of the project's own checks"], fix=["dev smoke local"])


def test_check_mpi_names_an_unknown_target_site(tmp_path):
    env = env_dir(
        tmp_path,
        STACK + "  specs: [mpi-probe]\n  container:\n    format: singularity\n"
        "    labels: {org.climstack.target-site: archer3}\n",
    )
    refused("check-mpi", env, wrong=["org.climstack.target-site is 'archer3'"], fix=["archer2"])


@pytest.fixture
def container_copy(tmp_path) -> Path:
    """containers/archer2 copied with its committed recipe; the rest of the project linked."""
    (tmp_path / "containers").mkdir()
    shutil.copytree(PROJECT_ROOT / "containers" / "archer2", tmp_path / "containers" / "archer2")
    (tmp_path / "containers" / "templates").symlink_to(PROJECT_ROOT / "containers" / "templates")
    for name in ("environments", "site", "repo"):
        (tmp_path / name).symlink_to(PROJECT_ROOT / name)
    return tmp_path / "containers" / "archer2"


def test_containerize_check_refuses_a_changed_recipe_naming_the_difference(container_copy):
    ok = climstack("containerize", "--check", container_copy)  # the control: an exact copy
    assert ok.returncode == 0, ok.stderr
    recipe = container_copy / "app.def"
    text = recipe.read_text()
    line = '  spack ${scope:+-C "$scope"} -e . install --fail-fast\n'
    changed = '  spack ${scope:+-C "$scope"} -e . install\n'
    assert line in text
    recipe.write_text(text.replace(line, changed))
    message = refused(
        "containerize", "--check", container_copy, fix=["bin/climstack containerize"]
    )
    assert f"--- {recipe}" in message and "+++ containerize" in message
    assert f"\n-{changed}" in message
    assert f"\n+{line}" in message  # what `spack containerize` emits
    assert "--fail-fast" not in recipe.read_text()  # --check writes nothing


def test_image_refuses_to_replace_a_directory_it_did_not_build(tmp_path):
    precious = tmp_path / "home" / "notes.txt"
    precious.parent.mkdir()
    precious.write_text("keep me")
    refused(
        "image",
        "container-archer2",
        precious.parent,
        wrong=[f"{precious.parent} exists and is not an image"],
        fix=["new or empty directory"],
    )
    assert precious.read_text() == "keep me"


# --- buildcache, source-mirror -----------------------------------------------------------


@pytest.fixture
def keyring(tmp_path):
    """An empty Spack keyring of the test's own; the gpg-agent it starts is stopped."""
    home = tmp_path / "gpg"
    home.mkdir(mode=0o700)
    yield {"SPACK_GNUPGHOME": str(home)}
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], check=False)


def test_buildcache_key_files_missing_or_unwritable(tmp_path, keyring):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    public = blocker / "keys" / "centre.pub"
    create = ("buildcache", "key", "create", "A", "a@x.invalid", "--public", public)
    refused(*create, env=keyring, wrong=[f"key file {public}", "cannot be created"], fix=["path"])
    assert not list(Path(keyring["SPACK_GNUPGHOME"]).iterdir()), "a key was made anyway"
    dest = tmp_path / "nonexistent" / "centre.pub"
    export = ("buildcache", "key", "export", dest)
    refused(*export, env=keyring, wrong=[f"{dest.parent} does not exist"], fix=["existing"])
    trust = ("buildcache", "key", "trust", tmp_path / "other.pub")
    refused(*trust, env=keyring, wrong=["no key file"], fix=["key export"])


def test_buildcache_push_without_a_signing_key(tmp_path, keyring):
    cache = tmp_path / "cache"
    push = ("buildcache", "push", "local", cache)
    refused(*push, env=keyring, wrong=["no signing key"], fix=["key create", "--unsigned"])
    assert not cache.exists()


@pytest.mark.parametrize("verb", ["push", "install", "list"])
def test_buildcache_unsupported_url_scheme(tmp_path, verb):
    url = "ftp://mirror.invalid/cache"
    args = {
        "push": ("local", url),
        "install": (tmp_path / "spack.lock", url, "--into", tmp_path / "env"),
        "list": (url,),
    }[verb]
    refused("buildcache", verb, *args, wrong=[f"{url}: unsupported URL scheme 'ftp'"], fix=["oci"])


def test_buildcache_install_refuses_a_file_that_is_no_lockfile(tmp_path):
    (tmp_path / "cache").mkdir()
    for text in ("not json", '{"roots": "x"}'):
        lock = tmp_path / "spack.lock"
        lock.write_text(text)
        args = ("buildcache", "install", lock, tmp_path / "cache", "--into", tmp_path / "env")
        refused(*args, wrong=[f"{lock} is not a Spack lockfile"], fix=["spack.lock"])
        assert not (tmp_path / "env").exists()


@pytest.mark.parametrize("action", ["create", "fill-debian"])
def test_source_mirror_refuses_an_unconcretized_environment_and_a_file(tmp_path, action):
    env = env_dir(tmp_path, STACK + f"  - {PROJECT_ROOT}/site/local\n  specs: [zlib]\n")
    mirror = tmp_path / "mirror"
    refused("source-mirror", action, env, mirror, wrong=["not concretized"], fix=["concretize"])
    assert not mirror.exists()
    (env / "spack.lock").write_text("{}")  # the check reads no further than its presence
    mirror.write_text("a file")
    refused("source-mirror", action, env, mirror, wrong=[f"{mirror} is a file"], fix=["directory"])


def test_sif_refuses_a_directory_climstack_image_did_not_make(tmp_path):
    sif = tmp_path / "app.sif"
    refused(
        "sif",
        "container-archer2",
        sif,
        "--image",
        tmp_path,
        wrong=["is not an image `climstack image` made"],
        fix=["climstack image container-archer2"],
    )
    assert not sif.exists()


def test_bench_abi_prepare_takes_no_image_or_out(tmp_path):
    """--prepare builds the cache's image and runs nothing: an --image or --out with it is
    refused before anything is built."""
    for given in (["--image", str(tmp_path)], ["--out", str(tmp_path / "out")]):
        proc = climstack("bench", "abi", "--prepare", *given)
        assert proc.returncode == 2, proc.stderr
        assert "--prepare builds the image of the cache and runs nothing" in proc.stderr
        assert "drop --image and --out, or drop --prepare" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_bench_suite_fortran_names_the_hosts_that_have_fortran(tmp_path):
    """The MPICH ABI's Fortran slice needs the MPI's own Fortran side (Debian's MPICH here;
    PyPI's MPICH wheels have none; the standard ABI's is mpif's, on every host): a host
    without it is refused by name, before anything is built or run."""
    out = tmp_path / "out"
    proc = climstack("bench", "suite", "--tests", "fortran", "--hosts", "mpich-3.4.3",
                     "--routes", "native,bind", "--out", str(out))  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "no host of mpich-3.4.3 has a route of native,bind" in proc.stderr
    assert "with the Fortran tests" in proc.stderr
    assert "(the standard ABI's through mpif, on every host)" in proc.stderr
    assert "native: debian-mpich; bind: debian-mpich" in proc.stderr
    assert not out.exists()
