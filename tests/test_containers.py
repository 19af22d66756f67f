"""Container recipes: committed output, real parser, embedded environment, MPI ABI guard."""

import json
import os

import pytest
import yaml
from conftest import PROJECT_ROOT
from spython.main.parse.parsers import SingularityParser

from climstack import pins
from climstack.cray import mpich_base
from climstack.errors import ClimstackError
from climstack.image import build_args, image
from climstack.inputs import sites
from climstack.stack import containers, environments, lock_cache
from climstack_dev.cpe_tree import cray_sites

#: the MPICH-ABI images (a Cray MPICH replaces their MPICH); the MPI-5 ABI image's own
#: tests are in test_mpi_abi.py
CONTAINER_ENVS = containers.container_environments("mpich")


def test_there_is_a_container_environment_per_cray_site_and_the_standard_abi():
    assert {"container-archer2", "container-gaea-c6"} <= set(CONTAINER_ENVS)
    assert containers.container_environments("standard") == ["container-mpi-abi"]


@pytest.mark.parametrize("name", CONTAINER_ENVS)
def test_committed_recipe_is_what_containerize_emits(name):
    assert containers.write_recipes([name], check_only=True) == []


@pytest.mark.parametrize("name", CONTAINER_ENVS)
def test_recipe_parses_into_build_and_final_stages(name, tmp_path):
    env_dir = environments.resolve(name)
    # as `apptainer build` sees it without --build-arg: every input upstream
    recipe_text = (env_dir / containers.RECIPE).read_text()
    (tmp_path / "app.def").write_text(build_args.render(recipe_text, {}))
    stages = SingularityParser(str(tmp_path / "app.def")).recipe
    assert list(stages) == ["build", "final"]
    build, final = stages["build"], stages["final"]
    assert build.fromHeader == final.fromHeader == "debian:12"  # glibc 2.36 >= 2.26
    assert "repo /opt/climstack/repo" in build.files  # our package repo reaches the build
    assert (
        "site/container /opt/climstack/site/container" in build.files
    )  # the container scope among them
    post = "\n".join(build.install)
    # Spack, spack-packages and clingo pinned exactly as bin/setup pins them
    assert f"--branch {pins.SPACK.clone_ref} https://github.com/spack/spack.git" in post
    assert pins.SPACK.commit in post
    assert (
        f"--branch {pins.SPACK_PACKAGES.tag} https://github.com/spack/spack-packages.git" in post
    )
    clingo = next(
        line
        for line in (PROJECT_ROOT / "requirements.txt").read_text().splitlines()
        if line.startswith("clingo==")
    )
    assert f"pip install --quiet --index-url https://pypi.org/simple {clingo}" in post
    assert 'CLIMSTACK_IMAGE_SLICE="all"' in post and 'source_mirror=""' in post
    assert "climstack.image.image_check /opt/views/view" in post and "--link-xpmem" in post
    assert final.layer_files["build"] == [
        "/opt/climstack /opt",
        "/opt/software /opt",
        "/opt/views /opt",
    ]
    labels = dict(label.split(" ", 1) for label in final.labels)
    assert labels["org.climstack.target-site"] == containers.target_site(env_dir).name
    assert {
        "org.climstack.mpich-base",
        "org.climstack.mpi-abi",
        "org.climstack.xpmem",
        "org.climstack.spack",
    } <= set(labels)
    assert final.test and final.cmd  # %test and %runscript
    assert any(e.startswith("LD_LIBRARY_PATH=") for e in final.environ)


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """Concretize the spack.yaml a recipe writes into the image, laid out as in the image."""
    done = {}

    def concretize(name):
        if name not in done:
            recipe = (environments.resolve(name) / containers.RECIPE).read_text()
            root = tmp_path_factory.mktemp(name) / "opt" / "climstack"
            env = root / "containers" / "env"
            env.mkdir(parents=True)
            (env / "spack.yaml").write_text(containers.embedded_manifest(recipe))
            for source, target in image.recipe_files(recipe):
                link = root / os.path.relpath(target, "/opt/climstack")
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(PROJECT_ROOT / source)
            lock_cache.concretize(env)
            done[name] = json.loads((env / "spack.lock").read_text())
        return done[name]

    return concretize


@pytest.mark.parametrize("name", CONTAINER_ENVS)
def test_embedded_environment_concretizes_to_the_pinned_mpich(embedded, name):
    lock = embedded(name)
    nodes = list(lock["concrete_specs"].values())
    names = {n["name"] for n in nodes}
    assert "openmpi" not in names
    (mpich,) = [n for n in nodes if n["name"] == "mpich"]
    site = containers.target_site(environments.resolve(name))
    mpich_base.check_container_mpich(mpich["version"], containers.site_cray_mpich(site), name)
    # the labels are written by hand: they must tell the truth about the concretized image
    # and the site scope (a cray-mpich update in site/ without the label's fails here)
    manifest = yaml.safe_load((environments.resolve(name) / "spack.yaml").read_text())
    labels = manifest["spack"]["container"]["labels"]
    cray_mpich = containers.site_cray_mpich(site)
    assert labels["org.climstack.mpi-abi"].endswith(f"by cray-mpich {cray_mpich}"), labels
    base = mpich_base.base_of(cray_mpich)[0]
    assert labels["org.climstack.mpich-base"].startswith(f"ANL MPICH {base} "), labels
    assert labels["org.climstack.mpich-base"].endswith(f"image MPICH {mpich['version']}")
    assert labels["org.climstack.spack"] == pins.SPACK.tag
    assert labels["org.climstack.spack-ref"] == pins.SPACK.clone_ref
    assert labels["org.climstack.spack-commit"] == pins.SPACK.commit
    assert labels["org.climstack.spack-packages"] == pins.SPACK_PACKAGES.tag
    clingo = (PROJECT_ROOT / "requirements.txt").read_text().split("clingo==")[1].split()[0]
    assert labels["org.climstack.clingo"] == clingo
    variants = mpich["parameters"]
    assert (variants["device"], variants["netmod"], variants["pmi"]) == ("ch4", "ofi", "pmi2")
    assert variants["wrapperrpath"] is False
    assert "external" not in mpich  # built from source in the image
    assert {
        "osu-micro-benchmarks",
        "mpibench",
        "netcdf-bench",
        "benchio",
        "xpmem-stub",
        "mpi-probe",
    } <= names


def test_every_cray_mpich_in_our_sites_has_a_known_base():
    assert {"archer2", "gaea-c5", "gaea-c6", "setonix", "frontier", "lumi", "perlmutter"} <= set(
        cray_sites()
    )
    for site in cray_sites():  # a new site's container pin follows from this base
        cray_mpich = containers.site_cray_mpich(sites.get(site))
        base, source = mpich_base.base_of(cray_mpich)
        # cray-mpich 8.1.x (ARCHER2, Gaea), 9.0.x (LUMI, CPE 25.09), 9.1.x (Frontier and
        # Setonix, CPE 26.03)
        expected = {"9.0": "4.1.2", "9.1": "4.2.2"}.get(cray_mpich[:3], "3.4a2")
        assert base == expected and "HPE" in source, site


def test_mpich_newer_than_the_cray_base_is_refused():
    mpich_base.check_container_mpich("3.4.3", "8.1.23", "ok")
    with pytest.raises(ClimstackError) as error:
        mpich_base.check_container_mpich("4.0.2", "8.1.23", "containers/x/spack.yaml")
    assert "containers/x/spack.yaml" in str(error.value) and "3.4" in error.value.fix


def test_environment_without_container_section_is_refused(tmp_path):
    (tmp_path / "spack.yaml").write_text("spack:\n  specs: [zlib]\n")
    with pytest.raises(ClimstackError) as error:
        containers.recipe(tmp_path)
    assert str(tmp_path / "spack.yaml") in str(error.value) and "container:" in str(error.value)


def _container_env(tmp_path, packages: str) -> object:
    (tmp_path / "spack.yaml").write_text(
        f"""spack:
  include: [{PROJECT_ROOT}/environments/stack.yaml]
  specs: [mpi-probe]
  packages:
{packages}
  container:
    format: singularity
    labels: {{org.climstack.target-site: archer2}}
"""
    )
    lock_cache.concretize(tmp_path)
    return tmp_path


def test_open_mpi_container_is_refused(tmp_path):
    env = _container_env(tmp_path, "    mpi:\n      require: [openmpi]")
    with pytest.raises(ClimstackError) as error:
        containers.check_mpi(env)
    assert "openmpi, not MPICH" in str(error.value) and str(env / "spack.yaml") in str(error.value)


def test_container_mpich_newer_than_site_base_is_refused(tmp_path):
    env = _container_env(tmp_path, "    mpi:\n      require: ['mpich@4.0.2']")
    with pytest.raises(ClimstackError) as error:
        containers.check_mpi(env)
    assert "4.0.2 is newer than ANL MPICH 3.4a2" in str(error.value)


def _closure(module: str) -> set[str]:
    """The files of climstack's modules `module` imports, transitively, with the packages'
    __init__.py on the way (what `python3 -m MODULE` loads of climstack)."""
    import ast

    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        path = PROJECT_ROOT.joinpath(*parts).with_suffix(".py")
        if not path.is_file():
            path = PROJECT_ROOT.joinpath(*parts, "__init__.py")
        files = {f"{'/'.join(parts[:i])}/__init__.py" for i in range(1, len(parts))}
        files.add(str(path.relative_to(PROJECT_ROOT)))
        if files <= seen:
            continue
        seen |= files
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("climstack"):
                for alias in node.names:  # `from climstack.bind import elf`: a module
                    sub = f"{node.module}.{alias.name}"
                    is_module = PROJECT_ROOT.joinpath(*sub.split(".")).with_suffix(".py")
                    todo.append(sub if is_module.is_file() else node.module)
            elif isinstance(node, ast.Import):
                todo += [a.name for a in node.names if a.name.startswith("climstack")]
    return seen


@pytest.mark.parametrize("name", CONTAINER_ENVS)
def test_the_recipe_copies_the_image_checks_import_closure_alone(name):
    """The image runs climstack.image.image_check and nothing else of climstack: its %files
    copy that module's import closure, so a change elsewhere in climstack/ leaves the
    image's inputs (its key, its SIF) as they were."""
    recipe_text = (environments.resolve(name) / containers.RECIPE).read_text()
    copied = {s for s, _ in image.recipe_files(recipe_text) if s.startswith("climstack")}
    assert copied == _closure("climstack.image.image_check")
