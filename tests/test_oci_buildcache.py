"""The buildcache through a real OCI registry (Debian's docker-registry on loopback, HTTPS
with a self-signed certificate, basic auth): centre A pushes the slice signed, centre B
(new Spack, longer install root, A's public key) installs it from the registry only. Then
every refusal, each naming the registry and the reference."""

import base64
import json
import os
import shutil
import ssl
import subprocess
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest

from climstack.bind import loader, plan
from climstack.check import container_smoke, verify
from climstack.common import stamp
from climstack.errors import ClimstackError
from climstack.image import base_image, image, image_check
from climstack.inputs import sites
from climstack.launch import image_files, oci_images
from climstack.launch.runtimes import apptainer as apptainer_runtime
from climstack.stack import buildcache as bc
from climstack.stack import oci_cache, signing
from climstack.stack.registry import Registry
from climstack_dev import centre
from climstack_dev.centre import Centre

SLICE = {"xpmem-stub", "mpi-probe", "netcdf-c"}


def spack_find(centre: Centre, env: Path) -> dict[str, str]:
    out = centre.run("find", "--format", "{name} {hash}", env=env).stdout
    return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A registry for the module, its client environment set for Spack and climstack."""
    with Registry(tmp_path_factory.mktemp("registry")) as running:
        with mock.patch.dict(os.environ, running.environ()):
            yield running


@pytest.fixture(scope="module")
def pushed(centre_a, registry):
    """A's slice pushed signed: (url, the blobs it stored, push output)."""
    a, env, *_ = centre_a
    url = registry.url("centre-a/buildcache")
    output = oci_cache.push(env, url, spack=a)
    return url, registry.stored_blobs(), output


@pytest.fixture(scope="module")
def trusting(centre_a, tmp_path_factory) -> Path:
    """A keyring that trusts A's public key (`spack gpg trust`, 3 s, once): each centre B
    of the module starts from a copy of it."""
    template = Centre(tmp_path_factory.mktemp("keyring")).setup()
    signing.gpg_trust(centre_a[3], spack=template)
    return template.home / "gpg"


def centre_b(tmp_path: Path, keyring: Path | None) -> Centre:
    """B: a new Spack with a longer install root, and a copy of `keyring` (if given)."""
    root = tmp_path / "b-root-longer-than-a" / "opt"  # short of sbang's 127-character limit
    b = Centre(tmp_path / "b", install_root=root).setup()
    if keyring:  # the agent's sockets and lock files stay behind
        shutil.copytree(keyring, b.home / "gpg", ignore=shutil.ignore_patterns("S.*", "*.lock"))
    return b


def b_env(centre_a, tmp_path: Path) -> Path:
    return bc.env_from_lock(centre_a[1] / "spack.lock", tmp_path / "env")


def test_b_installs_a_slice_from_the_registry_only(centre_a, pushed, trusting, tmp_path):
    a, a_env, *_ = centre_a
    url, blobs, output = pushed
    assert "signed 5 images" in output and "(site local)" in output
    b = centre_b(tmp_path, trusting)
    env = b_env(centre_a, tmp_path)
    oci_cache.install(env, url, spack=b)
    a_hashes, b_hashes = spack_find(a, a_env), spack_find(b, env)
    assert SLICE <= set(b_hashes) and b_hashes == {n: a_hashes[n] for n in b_hashes}
    probe = Path(b.run("location", "-i", "mpi-probe", env=env).stdout.strip())
    assert probe.is_relative_to(b.install_root)
    assert len(str(b.install_root)) > len(str(bc.install_root(a, a_env)))
    out = subprocess.run(
        ["mpirun", "-np", "2", probe / "bin" / "mpi-probe"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "ranks: 2" in out


def test_second_push_of_an_unchanged_environment_moves_no_blob(centre_a, registry, pushed):
    a, env, *_ = centre_a
    url, blobs, _ = pushed
    output = oci_cache.push(env, url, spack=a)
    assert "signed 0 images" in output
    assert registry.stored_blobs() == blobs


def test_list_shows_specs_per_target_and_site(centre_a, pushed):
    a, *_ = centre_a
    specs = oci_cache.contents(pushed[0], spack=a)
    assert SLICE <= {s["name"] for s in specs}
    assert {s["site"] for s in specs} == {"local"}
    assert {s["signature"] for s in specs} == {"verified"}
    probe = next(s for s in specs if s["name"] == "mpi-probe")
    assert probe["mpi"] == ["mpich@4.0.2"] and probe["target"] and probe["os"] == "debian12"


def test_cli_list_prints_target_site_and_signature(centre_a, pushed):
    """`climstack buildcache list` as a user runs it (A's Spack config, the registry's
    client environment)."""
    proc = subprocess.run(
        ["bin/climstack", "buildcache", "list", pushed[0]],
        capture_output=True,
        text=True,
        env=centre_a[0].environ(),
    )
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if " mpi-probe@" in line)
    assert line.startswith("debian12-") and "site local (verified)" in line


# --- images straight from the buildcache ------------------------------------------------


@pytest.fixture(scope="module")
def probe_image(centre_a):
    """Our Debian 12 base put into a registry (umoci, skopeo), then A's slice pushed on it
    (`--base-image`): (the registry, the reference of mpi-probe's runnable image).

    The registry's storage is kept per slice and base, as `registry-smoke` keeps its own: a
    later session pushes nothing, so the image keeps its digest and a runtime's cache of it
    holds (Spack stamps each image config with the time of its push)."""
    a, env, *_ = centre_a
    roots = sorted(r["hash"] for r in json.loads((env / "spack.lock").read_text())["roots"])
    layout = (base_image.oci_layout() / "index.json").read_text()
    with Registry(centre.DEMO / "registries" / stamp.digest(*roots, layout)) as registry:
        with mock.patch.dict(os.environ, registry.environ()):
            base = base_image.push(f"{registry.host}/climstack/debian")
            assert base.endswith("/climstack/debian:12")
            oci_cache.push(env, registry.url("centre-a/images"), base_image=base, spack=a)
        yield registry, f"{registry.host}/centre-a/images:{tag_of(centre_a, 'mpi-probe')}"


@dataclass
class Pulled:
    output: str  # mpi-probe's, run from the pulled image on 2 ranks
    work: Path  # the directory it was pulled into, with the runtime's cache
    served: list[str]  # the blobs the registry sent during the pull (its log)


@pytest.fixture(scope="module")
def pulled(probe_image, tmp_path_factory):
    """mpi-probe's image pulled by a runtime and run, once per runtime for the module. Each
    pull is a first one: a new directory for the image and for the runtime's cache
    (APPTAINER_CACHEDIR, ch-image's storage), podman's copy removed before, so that no
    earlier session's result stands in for it (a warm cache hid a failing pull once)."""
    registry, reference = probe_image
    done = {}

    def pull(runtime: str) -> Pulled:
        if runtime not in done:
            work = tmp_path_factory.mktemp(f"pulled-{runtime}")
            if runtime == "podman":
                subprocess.run(["podman", "rmi", "--force", reference], capture_output=True)
            before = len(registry.served_blobs())
            env = {**registry.environ(), "APPTAINER_CACHEDIR": str(work / "apptainer-cache")}
            with mock.patch.dict(os.environ, env):
                output = container_smoke.run_pulled(reference, runtime, work=work)
            done[runtime] = Pulled(output, work, registry.served_blobs()[before:])
        return done[runtime]

    return pull


#: where Apptainer mounts its own file systems or the host's files over the image's
MOUNTED = ("/dev", "/proc", "/sys", "/tmp", "/var/tmp", "/run", "/root", "/home", "/etc/group")


def foreign_owners(tarball: Path) -> list[tuple[str, int, int]]:
    """(path, uid, gid) of each file or directory of the base's root filesystem owned by a
    user or group other than root, outside the paths Apptainer mounts over."""
    with tarfile.open(tarball) as tar:
        members = [m for m in tar if (m.isfile() or m.isdir()) and (m.uid or m.gid)]
    found = [("/" + m.name.removeprefix("./").strip("/"), m.uid, m.gid) for m in members]
    return [f for f in found if not f[0].startswith(MOUNTED)]


def manifest(registry: Registry, reference: str) -> dict:
    """The image manifest the registry serves for HOST/REPOSITORY:TAG."""
    repository, tag = reference.split("/", 1)[1].rsplit(":", 1)
    request = urllib.request.Request(
        f"https://{registry.host}/v2/{repository}/manifests/{tag}",
        headers={
            "Authorization": "Basic "
            + base64.b64encode(f"{registry.user}:{registry.password}".encode()).decode(),
            "Accept": "application/vnd.oci.image.manifest.v1+json, "
            "application/vnd.docker.distribution.manifest.v2+json",
        },
    )
    context = ssl.create_default_context(cafile=registry.ca)
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        return json.load(response)


def test_podmans_pull_is_given_the_credentials_in_an_auth_file_never_on_its_command_line(
    tmp_path, monkeypatch
):
    """`podman pull` gets the registry client's credentials in an auth file of its own
    (--authfile: readable by its owner only, the reference's registry host, removed after
    the pull, also a failed one), never as --creds USER:PASSWORD, which `ps` shows to every
    user of a login node. The real pull through it: test_buildcache_image_runs_mpi_probe_*."""
    monkeypatch.setenv("CLIMSTACK_OCI_USER", "centre-a")
    monkeypatch.setenv("CLIMSTACK_OCI_TOKEN", "s3cret-token")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    seen = []

    def run(argv, what, **kwargs):
        auth = Path(argv[argv.index("--authfile") + 1])
        seen.append((argv, auth, auth.stat().st_mode & 0o777, json.loads(auth.read_text())))
        if len(seen) == 2:
            raise ClimstackError("refused", fix="")

    monkeypatch.setattr(oci_images, "process", mock.Mock(run=run))
    reference = "127.0.0.1:5000/centre-a/images:probe"
    assert oci_images.pull_podman(["podman"], reference, tmp_path) == reference
    with pytest.raises(ClimstackError, match="refused"):
        oci_images.pull_podman(["podman"], reference, tmp_path)
    token = base64.b64encode(b"centre-a:s3cret-token").decode()
    for argv, auth, mode, content in seen:
        assert not any("s3cret-token" in arg for arg in argv), argv
        assert mode == 0o600 and content == {"auths": {"127.0.0.1:5000": {"auth": token}}}
        assert not auth.exists()


@pytest.mark.parametrize("runtime", container_smoke.RUNTIMES)
def test_buildcache_image_runs_mpi_probe_in_bind_mode(pulled, runtime):
    """Pulled as users do (ch-image pull, apptainer pull docker://, podman pull) and
    launched from the host on 2 ranks with the host MPI bound in."""
    out = pulled(runtime).output
    assert "ranks: 2" in out and "MPICH Version:\t4.0.2" in out
    assert f"loaded: {plan.LINKS_DIR}/" in out


@pytest.mark.parametrize("runtime", container_smoke.RUNTIMES)
def test_each_pull_fetched_the_image_from_the_registry(probe_image, pulled, runtime):
    """The pull really ran: the registry's log shows it sending the image's config and,
    to the runtimes whose cache the fixture made new, every layer."""
    registry, reference = probe_image
    found = manifest(registry, reference)
    layers = {layer["digest"].split(":", 1)[1] for layer in found["layers"]}
    served = set(pulled(runtime).served)
    assert found["config"]["digest"].split(":", 1)[1] in served
    if runtime != "podman":  # podman's storage may share the base's layer with other images
        assert layers <= served, f"{runtime} pulled {len(layers & served)} of {len(layers)} layers"


def test_apptainer_pull_keeps_files_owned_by_other_users_and_groups(probe_image, pulled):
    """As root, the provided Apptainer unpacks each layer as root of a user namespace; files
    owned by another user or group (the Debian base's /etc/gshadow is group shadow's) must
    keep their owners: with one id mapped, the pull failed on the first of them."""
    if apptainer_runtime.on_this_machine() != str(apptainer_runtime.PROVIDED):
        pytest.skip("this machine has a system apptainer: the provided one is not used")
    owners = foreign_owners(image.base_rootfs())
    assert any(uid for _, uid, _ in owners) and any(gid for _, _, gid in owners), owners
    sif = next(pulled("apptainer").work.glob("*.sif"))
    paths = [path for path, _, _ in owners]
    proc = subprocess.run(
        [apptainer_runtime.PROVIDED, "exec", sif, "stat", "-c", "%u:%g %n", *paths],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == [f"{uid}:{gid} {path}" for path, uid, gid in owners]


def test_buildcache_image_lacks_the_recipe_guarantees(probe_image, pulled):
    """What our containerize recipe adds: the local site builds with Spack's default RPATH
    and nothing links libxpmem, so image_check flags mpi-probe in the buildcache image."""
    work = pulled("charliecloud").work  # the image directory ch-image pulled
    image_dir = oci_images.charliecloud_image_dir(work / "ch-image", probe_image[1])
    probe = Path(image_files.on_path(image_dir, image_dir, "mpi-probe"))
    (info,) = image_check.mpi_users(image_check.scan(probe.parent, sysroot=image_dir))
    found = image_check.problems(info)
    assert "DT_NEEDED lacks libxpmem.so.0" in found
    assert any(p.startswith("has DT_RPATH") for p in found)


def test_a_buildcache_images_mpich_base_is_its_spack_specs(probe_image, pulled, tmp_path):
    """The image holds no MPI: mpi-probe runs on the host's alone. The smoke's gate took its
    MPICH base from the spec Spack keeps in its prefix (Debian's MPICH 4.0.2, the host's);
    the same program said to be built on MPICH 5.0.2 is refused, and without a spec the base
    is unknown, and refused too."""
    work = pulled("charliecloud").work
    image_dir = oci_images.charliecloud_image_dir(work / "ch-image", probe_image[1])
    probe = image_files.on_path(image_dir, image_dir, "mpi-probe")
    made = plan.make(sites.get("local"), "bind", view=loader.View())
    report = verify.check(probe, made, image_dir, runtime_image=image_dir)
    assert report.ok and report.image_mpi == "mpich@4.0.2 (the program's Spack spec)"
    copy = tmp_path / "image"
    shutil.copytree(image_dir, copy, symlinks=True)
    [spec] = copy.glob(f"{Path(probe).parent.parent.relative_to('/')}/.spack/spec.json")
    recorded = json.loads(spec.read_text())
    for node in recorded["spec"]["nodes"]:
        node["version"] = "5.0.2" if node["name"] == "mpich" else node["version"]
    spec.write_text(json.dumps(recorded))
    newer = verify.check(probe, made, copy, runtime_image=copy)
    assert any("of a newer MPICH series than the host's" in p for p in newer.problems)
    spec.unlink()
    unknown = verify.check(probe, made, copy, runtime_image=copy)
    assert any("cannot tell the MPICH base of the image's MPI" in p for p in unknown.problems)


def test_pulled_images_are_named_without_the_registry_host():
    """A registry on another port (a new loopback one each session) pulls onto the same
    image directory, not a copy per port."""
    a = oci_images.charliecloud_image_dir(Path("s"), "127.0.0.1:5000/centre-a/images:t")
    b = oci_images.charliecloud_image_dir(Path("s"), "127.0.0.1:5001/centre-a/images:t")
    assert a == b == Path("s/img/centre-a%images+t")
    assert oci_images.local_name("registry.example.org/a/b:c") == "a/b:c"
    assert oci_images.local_name("climstack/debian:12") == "climstack/debian:12"


def test_base_image_reference_must_name_a_repository():
    with pytest.raises(ClimstackError) as err:
        base_image.push("oci://127.0.0.1:5000/debian")
    assert "HOST[:PORT]/REPOSITORY" in str(err.value)


# --- refusals ---------------------------------------------------------------------------


def registry_api(registry: Registry, method: str, path: str, data=None, headers=None):
    login = base64.b64encode(f"{registry.user}:{registry.password}".encode()).decode()
    request = urllib.request.Request(
        f"https://{registry.host}{path}",
        data=data,
        method=method,
        headers={"Authorization": f"Basic {login}", **(headers or {})},
    )
    context = ssl.create_default_context(cafile=registry.ca)
    with urllib.request.urlopen(request, context=context) as response:
        return response.read(), response.headers


MANIFESTS = "/v2/centre-a/buildcache/manifests/"


def manifest_of(registry: Registry, tag: str):
    accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
    return registry_api(registry, "GET", MANIFESTS + tag, None, accept)


def tag_of(centre_a, name: str) -> str:
    lock = json.loads((centre_a[1] / "spack.lock").read_text())
    spec_hash, node = next((h, n) for h, n in lock["concrete_specs"].items() if n["name"] == name)
    return f"{name}-{node['version']}-{spec_hash}.spack"


def test_two_runs_serve_one_storage_each_with_its_own_credentials(tmp_path):
    """Two runs of the suite at once (a developer's beside CI's) start registries on the
    same kept storage: each one's clients get in with its own password. Before, the second
    wrote its htpasswd over the first's, whose clients then got HTTP 401."""
    with Registry(tmp_path / "shared") as first, Registry(tmp_path / "shared") as second:
        assert first.storage == second.storage and first.ca != second.ca
        assert first.status("/v2/") == 200 and second.status("/v2/") == 200
        assert first.status("/v2/", password=second.password) == 401
    assert not list((tmp_path / "shared" / "runs").iterdir())  # no credentials left behind


@pytest.fixture
def own_registry(registry, pushed, tmp_path):
    """A registry of the test's own, holding A's slice pushed signed (a test may spoil it):
    another registry on a copy of the module registry's storage."""
    shutil.copytree(registry.storage, tmp_path / "registry" / "storage")
    with Registry(tmp_path / "registry") as running:
        with mock.patch.dict(os.environ, running.environ()):
            yield running, running.url("centre-a/buildcache")


def test_replaced_manifest_is_refused(centre_a, own_registry, trusting, tmp_path):
    """The xpmem-stub tag made to point at mpi-probe's image: the signed digest differs."""
    registry, url = own_registry
    manifest, headers = manifest_of(registry, tag_of(centre_a, "mpi-probe"))
    registry_api(
        registry,
        "PUT",
        MANIFESTS + tag_of(centre_a, "xpmem-stub"),
        manifest,
        {"Content-Type": headers["Content-Type"]},
    )
    b = centre_b(tmp_path, trusting)
    env = b_env(centre_a, tmp_path)
    with pytest.raises(ClimstackError) as err:
        oci_cache.install(env, url, spack=b)
    message = str(err.value)
    assert url in message and tag_of(centre_a, "xpmem-stub") in message
    assert "registry serves" in message and "push again" in err.value.fix
    assert spack_find(b, env) == {}


def test_tampered_blob_is_refused(centre_a, own_registry, trusting, tmp_path):
    """A byte of xpmem-stub's tarball changed in the registry's storage."""
    registry, url = own_registry
    manifest, _ = manifest_of(registry, tag_of(centre_a, "xpmem-stub"))
    layer = json.loads(manifest)["layers"][-1]["digest"].split(":")[1]
    blob = registry.storage / "docker/registry/v2/blobs/sha256" / layer[:2] / layer / "data"
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.write_bytes(bytes(data))
    b = centre_b(tmp_path, trusting)
    env = b_env(centre_a, tmp_path)
    with pytest.raises(ClimstackError) as err:
        oci_cache.install(env, url, spack=b)
    assert url in str(err.value) and "xpmem-stub" in str(err.value)
    assert "xpmem-stub" not in spack_find(b, env)


def test_unsigned_push_is_refused_unless_asked_for(centre_a, registry, trusting, tmp_path):
    a, a_env, *_ = centre_a
    url = registry.url("centre-a/unsigned")
    assert "images with key" not in oci_cache.push(a_env, url, unsigned=True, spack=a)
    b = centre_b(tmp_path, trusting)
    env = b_env(centre_a, tmp_path)
    with pytest.raises(ClimstackError) as err:
        oci_cache.install(env, url, spack=b)
    assert url in str(err.value) and "unsigned: no signature" in str(err.value)
    assert "--unsigned" in err.value.fix
    oci_cache.install(env, url, unsigned=True, spack=b)
    assert SLICE <= set(spack_find(b, env))


def test_unknown_key_is_refused(centre_a, pushed, tmp_path):
    b = centre_b(tmp_path, keyring=None)
    env = b_env(centre_a, tmp_path)
    with pytest.raises(ClimstackError) as err:
        oci_cache.install(env, pushed[0], spack=b)
    assert pushed[0] in str(err.value) and "could not be verified" in str(err.value)
    assert "key trust" in err.value.fix


def test_wrong_credentials_are_refused(centre_a, registry, pushed, trusting, tmp_path):
    b = centre_b(tmp_path, trusting)
    env = b_env(centre_a, tmp_path)
    with mock.patch.dict(os.environ, registry.environ(password="not-the-password")):
        with pytest.raises(ClimstackError) as err:
            oci_cache.install(env, pushed[0], spack=b)
    assert pushed[0] in str(err.value) and "refused the credentials of centre-a" in str(err.value)
    assert "CLIMSTACK_OCI_TOKEN" in err.value.fix


def test_cache_at_another_path_is_named_as_empty(centre_a, registry, pushed, trusting, tmp_path):
    url = registry.url("centre-a/no-such-cache")
    env = b_env(centre_a, tmp_path)
    with pytest.raises(ClimstackError) as err:
        oci_cache.install(env, url, spack=centre_b(tmp_path, trusting))
    assert url in str(err.value) and "empty, or it lives at another repository path" in str(
        err.value
    )


def test_unreachable_registry_fails_fast_naming_it(centre_a, tmp_path):
    url = "oci+http://127.0.0.1:9/climstack/buildcache"
    with pytest.raises(ClimstackError) as err:
        oci_cache.install(b_env(centre_a, tmp_path), url, spack=centre_a[0])
    assert url in str(err.value) and "unreachable" in str(err.value)


def installed_kib(spack, env: Path) -> dict[str, int]:
    """The disk use of each package installed in `env`, in KiB (du -sk), externals left out."""
    found = spack.run("find", "--format", "{name} {prefix} {external}", env=env).stdout
    rows = [line.split() for line in found.splitlines() if len(line.split()) == 3]
    return {
        name: int(
            subprocess.run(["du", "-sk", prefix], capture_output=True, text=True).stdout.split()[0]
        )
        for name, prefix, external in rows
        if external == "False"
    }


def test_disk_full_at_b_leaves_nothing_half_installed(centre_a, pushed, trusting, tmp_path):
    """B's install root on a tmpfs sized from A's installs: gcc-runtime (27 MB) fits, and
    half of netcdf-c (about 3 MB) with room for the probes and the database: the slice
    does not."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root")
    a_kib = installed_kib(centre_a[0], centre_a[1])
    size = a_kib["gcc-runtime"] + a_kib["netcdf-c"] // 2 + 512
    b = centre_b(tmp_path, trusting)
    b.install_root.mkdir(parents=True)
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size}k", "tmpfs", b.install_root]
    subprocess.run(mount, check=True)
    try:
        env = b_env(centre_a, tmp_path)
        with pytest.raises(ClimstackError) as err:
            oci_cache.install(env, pushed[0], spack=b)
        assert "No space left on device" in str(err.value)
        found = b.run("find", "--format", "{name} {prefix}", env=env).stdout.split("\n")
        installed = {  # what Spack's database holds under B's root
            name: Path(prefix)
            for name, prefix in (line.split() for line in found if len(line.split()) == 2)
            if Path(prefix).is_relative_to(b.install_root)
        }
        assert "gcc-runtime" in installed and not SLICE <= set(installed)  # mid-install
        for prefix in installed.values():  # each whole: its provenance was written last
            assert (prefix / ".spack" / "spec.json").is_file()
        prefixes = {  # Spack keeps a failure mark in .spack-db, not a half prefix
            p.name.rsplit("-", 2)[0]
            for p in b.install_root.rglob("*-*-" + "?" * 32)
            if ".spack-db" not in p.parts
        }
        assert prefixes == set(installed), "a prefix Spack's database does not hold"
    finally:
        subprocess.run(["umount", "-l", b.install_root], check=False)
        shutil.rmtree(tmp_path / "b", ignore_errors=True)
