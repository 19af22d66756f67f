"""The bind plan's stages one by one (climstack.bind.stages), on a synthetic ARCHER2 tree
shaped like the Cray PE: each a function of the frozen request and of what the stages
before it returned; the plan they assemble is frozen and equals `make_plan`'s."""

import dataclasses
from pathlib import PurePosixPath

import pytest

from climstack.bind import loader
from climstack.bind import plan as planner
from climstack.bind import stages
from climstack.errors import ClimstackError
from climstack.inputs import sites
from climstack_dev import cray_tree

ENVIRON = {"LD_LIBRARY_PATH": "/opt/cray/libfabric/1.12.1.2.2.0.0/lib64"}


@pytest.fixture(scope="module")
def request_(tmp_path_factory) -> stages.Request:
    root = cray_tree.cray_tree(tmp_path_factory.mktemp("cray"))
    return stages.Request.of(
        sites.get("archer2"), "bind", loader.View(root), ENVIRON, prefix=cray_tree.CRAY_MPICH
    )


def test_the_request_is_frozen_and_reads_nothing_else(request_):
    with pytest.raises(dataclasses.FrozenInstanceError):
        request_.mode = "hybrid"
    with pytest.raises(TypeError):
        request_.environ["LD_LIBRARY_PATH"] = "/elsewhere"  # a read-only copy
    assert request_.flavour is None  # neither site.yaml nor $PE_ENV names one


def test_roots_are_the_mpi_and_the_sites_libraries(request_):
    roots = stages.roots(request_)
    assert roots.paths["libmpi.so.12"].startswith(cray_tree.CRAY_MPICH)
    assert set(request_.config["bind_libraries"]) <= set(roots.paths)
    assert roots.mpi["source"] == "--prefix" and "8.1.27" in roots.mpi["version"]
    hybrid = dataclasses.replace(request_, mode="hybrid")
    assert "libmpi.so.12" not in stages.roots(hybrid).paths


def test_the_search_path_puts_the_roots_directories_first(request_):
    roots = stages.roots(request_)
    search = stages.search_path(request_, roots)
    assert search[0] == str(PurePosixPath(roots.paths["libmpi.so.12"]).parent)
    at = search.index(ENVIRON["LD_LIBRARY_PATH"])
    assert search.index(request_.config["library_path"][0]) > at  # then site.yaml's


def test_a_library_nowhere_on_the_search_path_is_refused_naming_site_yaml(request_):
    roots = stages.Roots({"libnowhere.so.1": "libnowhere.so.1"}, {})
    with pytest.raises(ClimstackError) as refused:
        stages.closures(request_, roots, ("/opt/cray/pe/lib64",))
    assert "libnowhere.so.1" in refused.value.message and "site.yaml" in refused.value.message


def test_closures_links_and_binds(request_):
    roots = stages.roots(request_)
    search = stages.search_path(request_, roots)
    files = stages.closures(request_, roots, search)
    assert {"libmpi.so.12", "libxpmem.so.0"} <= set(files)
    plugins = stages.close_plugins(request_, files, search)
    every = {**files, **plugins.needed}
    bound = stages.bound_directories(request_, every, plugins)
    assert bound == stages.outermost(bound)  # none inside another
    links, why = stages.library_links(request_, stages.with_abi_spellings(every), bound, {})
    assert links["libmpich.so.12"] == links["libmpi.so.12"]  # both spellings of the ABI
    assert {entry["name"] for entry in why} == set(links)
    for host, inside in stages.binds(request_, bound):
        assert not inside.startswith(("/usr/", "/lib")), (host, inside)  # never over the image's


def test_system_directories_go_under_the_host_side():
    assert stages.container_path(PurePosixPath("/usr/lib64")) == f"{stages.HOST_SIDE}/usr/lib64"
    assert stages.container_path(PurePosixPath("/opt/cray/pe")) == "/opt/cray/pe"
    assert stages.outermost([PurePosixPath("/a/b"), PurePosixPath("/a"), PurePosixPath("/c")]) == [
        PurePosixPath("/a"),
        PurePosixPath("/c"),
    ]


def test_site_extras_list_what_this_host_lacks(request_):
    extras = stages.site_extras(request_)
    assert "/dev/xpmem" in extras.absent  # a device the tree has not
    assert extras.env == {
        k: str(v) for k, v in {**request_.config["env"], **request_.config["bind_env"]}.items()
    }


def test_the_assembled_plan_is_frozen_and_is_make_plans(request_):
    made = planner.assemble(request_, "singularity")
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.mode = "hybrid"
    again = planner.make_plan(
        sites.get("archer2"),
        view=request_.view,
        prefix=cray_tree.CRAY_MPICH,
        environ=ENVIRON,
        runtime="singularity",
    )
    assert made == again and made.library_path == [planner.LINKS_DIR]
