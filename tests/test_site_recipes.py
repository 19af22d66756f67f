"""`spack containerize` where a user types it, in a site environment (environments/<site>):
Spack embeds the active environment's own manifest, the host's Cray PE as externals, so the
recipe it prints builds nothing and fails at once, naming the site's image environment and
the command that makes it; that image fits the site (its CPU, and an MPICH the site's Cray
MPICH base can replace)."""

import subprocess

import pytest
from conftest import PROJECT_ROOT, run_spack

from climstack import spack
from climstack.cray import mpich_base
from climstack.inputs import parse_yaml, sites
from climstack.launch.runtimes import apptainer
from climstack.stack import containers, environments
from climstack_dev import IN_SPACK
from climstack_dev.cpe_tree import cray_sites

SITE_ENVIRONMENTS = sorted(
    p.parent.name for p in (PROJECT_ROOT / "environments").glob("*/spack.yaml")
)


def recipe_of(site: str) -> str:
    env_dir = PROJECT_ROOT / "environments" / site
    return run_spack("containerize", env=env_dir, cwd=env_dir).stdout  # it reads ./spack.yaml


def labels_of(recipe: str) -> dict[str, str]:
    section = recipe.split("%labels\n", 1)[1].split("\n\n", 1)[0]
    return dict(line.split(None, 1) for line in section.strip().splitlines())


def arch_of(manifest: dict, name: str) -> str:
    """The target= of a definitions entry (site_arch, container_arch)."""
    for entry in manifest.get("definitions", []):
        if name in entry:
            return next(w for w in entry[name][0].split() if w.startswith("target="))
    raise AssertionError(f"no {name}")


@pytest.mark.parametrize("site", SITE_ENVIRONMENTS)
def test_a_site_environments_recipe_names_its_image(site):
    recipe = recipe_of(site)
    assert recipe.startswith("Bootstrap: scratch\n")  # nothing to download before it fails
    labels = labels_of(recipe)
    assert labels["org.climstack.site-environment"] == site
    image = labels["org.climstack.image-environment"]
    assert (PROJECT_ROOT / image / "app.def").is_file()
    assert f"bin/climstack containerize {image} && apptainer build" in recipe
    assert "exit 1" in recipe


@pytest.mark.parametrize("site", sorted(set(cray_sites()) & set(SITE_ENVIRONMENTS)))
def test_the_named_image_fits_the_cray_site(site):
    """Its MPICH series is not newer than the site's Cray MPICH base, its CPU the site's."""
    image_dir = PROJECT_ROOT / labels_of(recipe_of(site))["org.climstack.image-environment"]
    manifest = environments.manifest(image_dir)["spack"]
    pin = manifest["packages"]["mpich"]["require"][0].lstrip("@")
    cray_mpich = containers.site_cray_mpich(sites.get(site))
    mpich_base.check_container_mpich(pin, cray_mpich, str(image_dir / "spack.yaml"))
    site_definitions = parse_yaml(sites.get(site).path / "definitions.yaml", fix="")
    image_target, site_target = arch_of(manifest, "container_arch"), arch_of(
        site_definitions, "site_arch"
    )
    assert runs_on(image_target, site_target), (image_target, site_target)


def runs_on(image_target: str, site_target: str) -> bool:
    """Does code for `image_target` run on `site_target`'s CPU (Spack's archspec)?"""
    return spack.DEFAULT.python(IN_SPACK, "runs-on", image_target[7:], site_target[7:])


def test_apptainer_refuses_the_recipe_at_once_with_the_command(tmp_path):
    """The real Apptainer: its %setup (on the host, before anything is built) fails."""
    recipe = tmp_path / "app.def"
    recipe.write_text(recipe_of("setonix"))
    proc = subprocess.run(
        [apptainer.on_this_machine(), "build", str(tmp_path / "x.sif"), str(recipe)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode != 0 and not (tmp_path / "x.sif").exists()
    said = proc.stdout + proc.stderr
    assert "failed to run %setup script" in said
    assert "its image is containers/frontier" in said
    assert "bin/climstack containerize containers/frontier" in said
