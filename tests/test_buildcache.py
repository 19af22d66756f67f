"""Round trip between two Spack instances ("centres") with different install roots.

Centre A builds the slice (xpmem-stub, mpi-probe, netcdf-c +mpi from the Debian-filled
source mirror, on the Debian MPICH/HDF5 externals) and pushes it signed to a file://
buildcache. Centre B (fresh config, user cache, keyring; a longer install root; no source
mirror) trusts A's public key and installs A's lockfile cache-only. The binaries must run
at B, hold no trace of A's root, and have A's hashes. Then the refusals.

A's work is kept under cache_dir()/buildcache-demo (keyring, install tree, the cache keyed
by the lockfile's root hashes), so only the first run builds (a few minutes); B is new
every run.
"""

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from climstack.errors import ClimstackError
from climstack.stack import buildcache as bc
from climstack.stack import build_times
from climstack.stack import signing
from climstack.stack.sources import source_mirror as sm
from climstack_dev.centre import Centre, tarball_of


def spack_find(centre: Centre, env: Path) -> dict[str, str]:
    """name -> hash of the installed specs of an environment (externals excluded)."""
    out = centre.run("find", "--format", "{name} {hash} {external}", env=env).stdout
    found = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 2 and "external" not in line.lower() and len(words[1]) == 32:
            found[words[0]] = words[1]
    return found


def location(centre: Centre, env: Path, name: str) -> Path:
    return Path(centre.run("location", "-i", name, env=env).stdout.strip())


@pytest.fixture(scope="module")
def centre_b(centre_a, tmp_path_factory):
    """B: new, longer install root, A's public key trusted, A's lockfile installed."""
    a, a_env, url, public, _ = centre_a
    home = tmp_path_factory.mktemp("b")
    root = home / "centre-b-has-its-own-and-much-longer-install-root" / "opt" / "spack"
    b = Centre(home, install_root=root).setup()
    signing.gpg_trust(public, spack=b)
    env = bc.env_from_lock(a_env / "spack.lock", home / "env")
    bc.install(env, url, spack=b)
    return b, env, root


def test_debian_filled_source_mirror_holds_the_recipes_tarball(centre_a):
    a, env, *_, report = centre_a
    netcdf = [spec for spec in report if spec.startswith("netcdf-c@")]
    assert netcdf and ("Debian netcdf" in report[netcdf[0]] or report[netcdf[0]] == "present")
    need = [n for n in sm.needed_sources(env, spack=a) if n["name"] == "netcdf-c"][0]
    tarball = a.home / "source-mirror" / need["paths"][0]
    assert sm.sha256sum(tarball) == need["sha256"]  # Spack's own checksum, still checked
    alias = a.home / "source-mirror" / need["paths"][1]
    assert alias.resolve() == tarball.resolve()


def test_source_mirror_create_copies_it_offline(centre_a, tmp_path):
    """`spack mirror create --all` for the slice: upstream is unreachable here, so this only
    works because the Debian-filled mirror serves netcdf-c with the recipe's checksum."""
    a, env, *_ = centre_a
    sm.create(env, tmp_path / "mirror", spack=a)
    need = [n for n in sm.needed_sources(env, spack=a) if n["name"] == "netcdf-c"][0]
    assert sm.sha256sum(tmp_path / "mirror" / need["paths"][0]) == need["sha256"]


def test_b_installs_a_binaries_with_a_hashes(centre_a, centre_b):
    a, a_env, *_ = centre_a
    b, b_env, b_root = centre_b
    a_hashes, b_hashes = spack_find(a, a_env), spack_find(b, b_env)
    assert {"xpmem-stub", "mpi-probe", "netcdf-c"} <= set(b_hashes)
    assert b_hashes == {name: a_hashes[name] for name in b_hashes}
    assert len(str(b_root)) > len(str(bc.install_root(a, a_env)))  # B's root is longer
    assert location(b, b_env, "netcdf-c").is_relative_to(b_root)


def test_build_times_name_as_builds_and_leave_out_bs_cache_installs(centre_a, centre_b, tmp_path):
    """`make local`'s package table (climstack.stack.build_times) on Spack's own records:
    A built the slice from source, B installed the same specs from A's buildcache (whose
    tarballs carry A's record, with `cache` true at B)."""
    a, a_env, *_ = centre_a
    b, b_env, b_root = centre_b
    built = build_times.builds_since(bc.install_root(a, a_env), since=0)
    assert {"xpmem-stub", "mpi-probe", "netcdf-c"} <= {build.package for build in built}
    assert all(build.seconds > 0 for build in built)
    assert [build.seconds for build in built] == sorted((b.seconds for b in built), reverse=True)
    assert (location(b, b_env, "mpi-probe") / build_times.RECORD).is_file()
    assert build_times.builds_since(b_root, since=0) == []
    assert build_times.builds_since(bc.install_root(a, a_env), since=time.time() + 60) == []
    copies = tmp_path / "copies"  # an image's twin, copied with its times: one build
    for twin in ("tests-image-1", "image", "tests-image-2"):
        shutil.copytree(location(a, a_env, "mpi-probe") / ".spack", copies / twin / ".spack")
    [copied] = build_times.builds_since(copies, since=0)
    assert copied.package == "mpi-probe" and copied.where == "image"  # not a tests' copy
    table = build_times.table(built, count=2).splitlines()
    assert len(table) == 4 and table[1].split()[0] == built[0].package
    assert table[-1].startswith(f"{len(built)} packages built")


def test_no_file_under_b_root_mentions_a_root(centre_a, centre_b):
    """Every file B runs, loads or reads (executables, shared libraries, scripts, headers,
    pkg-config and CMake files) is relocated. The `.spack/` provenance records (build logs,
    the recorded build prefix) keep A's path, by Spack's design; so would a static archive,
    which Spack does not relocate, but the stack installs none (repo/packages/netcdf-c)."""
    a, a_env, *_ = centre_a
    b, _, b_root = centre_b
    a_root = str(bc.install_root(a, a_env)).encode()
    leaks = [
        path
        for path in b_root.rglob("*")
        if path.is_file()
        and not path.is_symlink()
        and ".spack" not in path.parts
        and a_root in path.read_bytes()
    ]
    assert leaks == [], f"A's root {a_root!r} left in B"


def test_mpi_probe_from_cache_runs_on_two_ranks(centre_b):
    b, env, _ = centre_b
    probe = location(b, env, "mpi-probe") / "bin" / "mpi-probe"
    out = subprocess.run(
        ["mpirun", "-np", "2", str(probe)], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert "ranks: 2" in out and "MPICH Version:\t4.0.2" in out


def nc_config(prefix: Path) -> dict[str, str]:
    out = subprocess.run(
        [prefix / "bin" / "nc-config", "--all"], capture_output=True, text=True, check=True
    ).stdout
    return {
        k.strip(): v.strip()
        for k, _, v in (line.partition("->") for line in out.splitlines())
        if _
    }


def test_netcdf_from_cache_reports_itself_and_writes_in_parallel(centre_b, tmp_path):
    b, env, _ = centre_b
    prefix = location(b, env, "netcdf-c")
    config = nc_config(prefix)
    assert config["--prefix"] == str(prefix) and config["--version"] == "netCDF 4.9.3"
    assert config["--has-parallel4"] == "yes" and config["--has-nc4"] == "yes"
    # a program compiled against B's headers and library writes one variable from 2 ranks
    source, exe, data = tmp_path / "par.c", tmp_path / "par", tmp_path / "par.nc"
    source.write_text(PARALLEL_WRITE)
    flags = subprocess.run(
        [prefix / "bin" / "nc-config", "--cflags", "--libs"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    subprocess.run(
        ["mpicc", str(source), "-o", str(exe), *flags, f"-Wl,-rpath,{prefix}/lib"],
        check=True,
        capture_output=True,
        text=True,
    )
    subprocess.run(
        ["mpirun", "-np", "2", str(exe), str(data)],
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    ncdump = prefix / "bin" / "ncdump"
    kind = subprocess.run([ncdump, "-k", data], capture_output=True, text=True, check=True)
    assert kind.stdout.strip() == "netCDF-4"
    dump = subprocess.run([ncdump, data], capture_output=True, text=True, check=True).stdout
    assert " v = 0, 1 ;" in dump, dump


PARALLEL_WRITE = r"""
#include <mpi.h>
#include <netcdf.h>
#include <netcdf_par.h>
#include <stdio.h>
#include <stdlib.h>
#define CHECK(e) do { int s = (e); \
    if (s) { fprintf(stderr, "%s\n", nc_strerror(s)); exit(1); } } while (0)
int main(int argc, char **argv) {
    int rank, ncid, dim, var;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    CHECK(nc_create_par(argv[1], NC_NETCDF4 | NC_CLOBBER, MPI_COMM_WORLD, MPI_INFO_NULL, &ncid));
    CHECK(nc_def_dim(ncid, "x", 2, &dim));
    CHECK(nc_def_var(ncid, "v", NC_INT, 1, &dim, &var));
    CHECK(nc_enddef(ncid));
    CHECK(nc_var_par_access(ncid, var, NC_COLLECTIVE));
    size_t start = rank, count = 1;
    CHECK(nc_put_vara_int(ncid, var, &start, &count, &rank));
    CHECK(nc_close(ncid));
    MPI_Finalize();
    return 0;
}
"""


# --- refusals ---------------------------------------------------------------------------


def fresh_centre(tmp_path: Path, name: str) -> Centre:
    return Centre(tmp_path / name, install_root=tmp_path / name / "opt").setup()


def test_tampered_tarball_is_refused(centre_a, tmp_path):
    a, a_env, url, public, _ = centre_a
    copy = tmp_path / "cache"
    shutil.copytree(Path(url.removeprefix("file://")), copy)
    tarball = tarball_of(copy, "xpmem-stub")
    data = bytearray(tarball.read_bytes())
    data[len(data) // 2] ^= 0xFF
    tarball.write_bytes(bytes(data))
    c = fresh_centre(tmp_path, "c")
    signing.gpg_trust(public, spack=c)
    env = bc.env_from_lock(a_env / "spack.lock", tmp_path / "env")
    with pytest.raises(ClimstackError) as err:
        bc.install(env, copy.as_uri(), spack=c)
    assert copy.as_uri() in str(err.value) and "xpmem-stub" in str(err.value)
    assert "checksum failed" in str(err.value) and "tampered" in err.value.fix
    assert "xpmem-stub" not in spack_find(c, env)


def test_unsigned_cache_is_refused_unless_asked_for(centre_a, tmp_path):
    a, a_env, *_ = centre_a
    unsigned = (tmp_path / "unsigned").as_uri()
    bc.push(a_env, unsigned, unsigned=True, spack=a)
    d = fresh_centre(tmp_path, "d")
    env = bc.env_from_lock(a_env / "spack.lock", tmp_path / "env")
    with pytest.raises(ClimstackError) as err:
        bc.install(env, unsigned, spack=d)
    assert unsigned in str(err.value) and "signature was not found" in str(err.value)
    assert "--unsigned" in err.value.fix
    bc.install(env, unsigned, unsigned=True, spack=d)
    assert {"xpmem-stub", "mpi-probe", "netcdf-c"} <= set(spack_find(d, env))


def test_signed_cache_is_refused_without_the_signers_key(centre_a, tmp_path):
    a, a_env, url, *_ = centre_a
    e = fresh_centre(tmp_path, "e")
    env = bc.env_from_lock(a_env / "spack.lock", tmp_path / "env")
    with pytest.raises(ClimstackError) as err:
        bc.install(env, url, spack=e)
    assert "Signature could not be verified" in str(err.value)
    assert "key trust" in err.value.fix


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/buildcache",
        "oci://127.0.0.1:9/cache",
        "file:///nonexistent/climstack/buildcache",
    ],
)
def test_unreachable_mirror_fails_fast_naming_it(centre_a, tmp_path, url):
    a, a_env, *_ = centre_a
    env = bc.env_from_lock(a_env / "spack.lock", tmp_path / "env")
    with pytest.raises(ClimstackError) as err:
        bc.install(env, url, spack=fresh_centre(tmp_path, "f"))
    assert url in str(err.value)


def test_list_shows_the_slice_for_its_target(centre_a):
    a, a_env, url, *_ = centre_a
    specs = bc.contents(url, spack=a)
    lock = a_env / "spack.lock"
    mine = bc.select(specs, lock=lock)
    assert {"xpmem-stub", "mpi-probe", "netcdf-c"} <= {s["name"] for s in mine}
    target = next(s["target"] for s in mine if s["name"] == "netcdf-c")
    assert all(s["target"] == target for s in bc.select(specs, target=target))
    assert bc.select(specs, target="no-such-target") == []
    assert next(s for s in mine if s["name"] == "mpi-probe")["mpi"] == ["mpich@4.0.2"]
