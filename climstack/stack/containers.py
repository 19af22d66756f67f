"""Container environments: check them, emit their Apptainer recipes, guard the MPI ABI.

A container environment is containers/<site>/spack.yaml with a `container:` section; its
label org.climstack.target-site names the site whose Cray MPICH will replace the image's
MPICH at run time. `spack containerize` renders it through our template
(containers/templates/container/climstack.def) into containers/<site>/app.def, which is
committed so that review sees every change of the recipe.
"""

import difflib
import json
from pathlib import Path

from packaging.version import Version

from climstack import spack
from climstack.common import atomic
from climstack.cray import mpich_base
from climstack.errors import ClimstackError
from climstack.inputs import sites
from climstack.pins import PROJECT_ROOT
from climstack.stack import environments, recipes

RECIPE = "app.def"
SITE_LABEL = "org.climstack.target-site"
MANIFEST_MARKER = "END_OF_MANIFEST"
#: the scope that makes a container environment's image the MPI-5 standard ABI's
STANDARD_ABI_SCOPE = "site/container-mpi-abi"
#: the first MPICH whose libmpi_abi.so.1 holds PMPI_* too (5.0.0-5.0.1: libpmpi_abi)
STANDARD_ABI_MPICH = "5.0.2"
#: a site environment's `container:` template: its recipe names the site's image, builds nothing
SITE_TEMPLATE = "container/site-environment.def"
IMAGE_LABEL = "org.climstack.image-environment"


def container_section(env_dir: Path) -> dict:
    manifest = env_dir / "spack.yaml"
    section = environments.manifest(env_dir)["spack"].get("container")
    if not isinstance(section, dict) or not section:
        raise ClimstackError(
            f"{manifest} has no `container:` section, so `spack containerize` cannot use it",
            fix="copy the container: section of containers/archer2/spack.yaml and adapt "
            "its labels to the target site",
        )
    if section.get("template") == SITE_TEMPLATE:
        image = (section.get("labels") or {}).get(IMAGE_LABEL, "containers/<site>")
        raise ClimstackError(
            f"{manifest} is a site environment (the host's Cray PE or packages as externals): "
            f"its `container:` section only names the site's image, {image}",
            fix=f"give the image's container environment: {image}",
        )
    return section


def abi(env_dir: Path) -> str:
    """ "standard" (the MPI-5 ABI, libmpi_abi.so.1) if the environment includes the
    standard ABI's scope, else "mpich" (libmpi.so.12, replaced by a Cray MPICH)."""
    includes = environments.manifest(env_dir)["spack"].get("include", [])
    own = {str((env_dir / str(i)).resolve()) for i in includes}
    return "standard" if str(PROJECT_ROOT / STANDARD_ABI_SCOPE) in own else "mpich"


def target_site(env_dir: Path) -> sites.Site:
    labels = container_section(env_dir).get("labels")
    site = labels.get(SITE_LABEL) if isinstance(labels, dict) else None
    if not isinstance(site, str) or site not in sites.known_sites():
        raise ClimstackError(
            f"{env_dir / 'spack.yaml'}: key spack.container.labels.{SITE_LABEL} is {site!r}, "
            "not a site",
            fix=f"set it to one of: {', '.join(sites.known_sites())}",
        )
    return sites.get(site)


def site_cray_mpich(site: sites.Site) -> str:
    """Version of the cray-mpich external in the site's merged Spack configuration."""
    version = site.external_version("cray-mpich")
    if not version:
        raise ClimstackError(
            f"site {site.name} ({site.path}) declares no cray-mpich "
            "external with a version in its merged packages config",
            fix="add the site's cray-mpich under packages:cray-mpich:externals "
            "(in the site scope or a scope it includes)",
        )
    return version


def recipe(env_dir: Path) -> str:
    container_section(env_dir)
    return spack.run("containerize", env=env_dir, cwd=env_dir).stdout  # it reads ./spack.yaml


def embedded_manifest(recipe_text: str) -> str:
    """The spack.yaml that the recipe writes into the image (a here-document of %post)."""
    for stage in recipes.stages(recipe_text):
        post = stage.section("post")
        manifest = post and recipes.heredoc(post.body, MANIFEST_MARKER)
        if manifest is not None:
            return manifest
    raise ClimstackError("recipe embeds no spack.yaml (template changed?)")


def check_mpi(env_dir: Path) -> dict:
    """The concretized MPI of a container environment, refused unless it can be swapped."""
    where = str(env_dir / "spack.yaml")
    lock = json.loads((env_dir / "spack.lock").read_text())
    specs = lock["concrete_specs"]
    providers = {
        specs[dep["hash"]]["name"]: specs[dep["hash"]]
        for node in specs.values()
        for dep in node.get("dependencies", [])
        if "mpi" in dep["parameters"].get("virtuals", [])
    }
    standard = abi(env_dir) == "standard"
    # the standard ABI image's mpi is mpif: Fortran over the C ABI of its MPICH +abi
    allowed = {"mpich", "mpif"} if standard else {"mpich"}
    if not providers or not set(providers) <= allowed:
        raise ClimstackError(
            f"{where}: MPI is {', '.join(sorted(providers)) or 'missing'}, not MPICH; only an "
            "MPICH-ABI MPI (libmpi.so.12) can be replaced by the host's Cray MPICH"
            + (
                ", and only MPICH's standard ABI (under mpif) by an MPI-5 host's"
                if standard
                else ""
            ),
            fix="require mpich (site/container does: packages: mpi: require: [mpich])"
            + (f", or mpif ({STANDARD_ABI_SCOPE})" if standard else ""),
        )
    mpich = next(node for node in specs.values() if node["name"] == "mpich")
    if standard:
        version = mpich["version"]
        if not mpich["parameters"].get("abi") or Version(version) < Version(STANDARD_ABI_MPICH):
            raise ClimstackError(
                f"{where}: mpich@{version} {'+' if mpich['parameters'].get('abi') else '~'}abi "
                f"cannot build the MPI-5 standard ABI image: its programs must link "
                "libmpi_abi.so.1 alone, with PMPI_* in it",
                fix=f"require mpich@{STANDARD_ABI_MPICH}: +abi ({STANDARD_ABI_SCOPE})",
            )
        return mpich
    site = target_site(env_dir)
    mpich_base.check_container_mpich(mpich["version"], site_cray_mpich(site), where)
    return mpich


def write_recipes(names: list[str], check_only: bool) -> list[str]:
    """Render each container environment's recipe; with check_only, report drift instead."""
    drifted = []
    for name in names:
        env_dir = environments.resolve(name)
        text = recipe(env_dir)
        committed = env_dir / RECIPE
        old = committed.read_text() if committed.exists() else ""
        if check_only:
            if old != text:
                drifted.append(
                    "".join(
                        difflib.unified_diff(
                            old.splitlines(True),
                            text.splitlines(True),
                            str(committed),
                            "containerize",
                        )
                    )
                )
        else:
            atomic.write_text(committed, text)
            print(f"{committed.relative_to(PROJECT_ROOT)}: {len(text.splitlines())} lines")
    return drifted


def container_environments(kind: str | None = None) -> list[str]:
    """The container environments; `kind` "mpich" or "standard": those of that MPI ABI."""
    names = [n for n in environments.find_environments() if n.startswith("container-")]
    return [n for n in names if kind is None or abi(environments.resolve(n)) == kind]
