"""The bind plan as a Container Device Interface (CDI) spec, which podman (>= 4.1), Apptainer
1.5, containerd and Kubernetes apply: one device of kind KIND, named after the plan's site,
whose containerEdits are the plan's binds (read-only mounts), its environment and its device
nodes; no hooks (Apptainer ignores them). `spec_of` makes it from the Plan alone, so plan and
spec cannot disagree; every spec written or read is validated against the upstream CDI
schema (climstack.bind.cdi_reference, the reference library at its pinned tag).

A spec that is to carry a plan (`verify --cdi`) is judged on what a runtime applies: every
edit of the spec, top-level and the device's, as the reference `cdi` resolves it for the
plan's device, compared with the plan; hooks, writable mounts, variables the plan does not
set and preloads are refused by name. An accepted spec is what runs after (`Applied`).

A plan's specs live in its own spec directories, `<plan>/cdi/<digest>/` (one per variant of
the plan a launch runs), never in /etc/cdi.
"""

import json
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePosixPath

import jsonschema

from climstack import inputs
from climstack.bind import cdi_reference as reference
from climstack.bind.plan import Plan
from climstack.common import atomic, stamp
from climstack.errors import ClimstackError

VERSION = "0.5.0"
KIND = "climstack.org/mpi"
FILE = "climstack.org-mpi.json"
#: every mount is read-only: the only option Apptainer 1.5 honours
MOUNT_OPTIONS = ["ro", "rbind", "nosuid"]
FIX = "write it again with `climstack bind SITE --format cdi --out PLAN_DIR`"
#: what a runtime reads of a spec directory
SUFFIXES = (".json", ".yaml")
#: an MPI library by its file name (MPICH's, Open MPI's, the standard ABI's)
MPI_LIBRARY = re.compile(r"^lib(p?mpi|mpich)([._]|$)")


def device_name(plan: Plan) -> str:
    """The plan's device: its site's name (a site given by path: the directory's)."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", Path(plan.site).name).strip("-_")
    if not name:
        raise ClimstackError(
            f"site {plan.site!r} gives no CDI device name (alphanumerics, - and _)",
            fix="name the site's directory with letters or digits",
        )
    return name


def device(plan: Plan) -> str:
    """What a runtime is asked for: `--device climstack.org/mpi=<site>`."""
    return f"{KIND}={device_name(plan)}"


def spec_of(plan: Plan) -> dict:
    """The CDI spec of `plan` as written (its directory bound): mounts, env, device nodes."""
    if not plan.directory:
        raise ClimstackError(
            f"the plan of site {plan.site} has no directory: its links are not on disk",
            fix="write it first: `climstack bind SITE --out DIR`, then load DIR",
        )
    edits = {
        "env": [f"{key}={value}" for key, value in sorted(plan.runtime_env().items())],
        "mounts": [
            {"hostPath": src, "containerPath": dst, "options": list(MOUNT_OPTIONS)}
            for src, dst in plan.binds
        ],
    }
    if plan.devices:
        edits["deviceNodes"] = [{"path": node, "hostPath": node} for node in plan.devices]
    spec = {
        "cdiVersion": VERSION,
        "kind": KIND,
        "devices": [{"name": device_name(plan), "containerEdits": edits}],
    }
    return validate(spec, Path(plan.directory) / "cdi" / FILE)


def validate(spec, where: Path) -> dict:
    """`spec` (read from `where`), checked against the upstream CDI schema."""
    if spec is None:
        raise ClimstackError(f"{where} is empty", fix=FIX)
    error = jsonschema.exceptions.best_match(reference.validator().iter_errors(spec))
    if error is not None:
        what, expected = inputs._describe(error)
        raise ClimstackError(
            f"{where}: key {inputs._key_path(error)}: {what} (the CDI schema of "
            f"{reference.PIN.name} {reference.PIN.tag})",
            fix="; ".join(filter(None, [expected, FIX])),
        )
    return spec


def text(spec: dict) -> str:
    return json.dumps(spec, indent=2, sort_keys=True) + "\n"


def spec_dir(plan: Plan) -> Path:
    """The plan's spec directory holding its spec (written now if absent): what
    `--cdi-spec-dir` (podman) and `--cdi-dirs` (Apptainer 1.5) take."""
    content = text(spec_of(plan))
    directory = Path(plan.directory) / "cdi" / stamp.digest(content, length=10)
    if not (directory / FILE).is_file() or (directory / FILE).read_text() != content:
        directory.mkdir(parents=True, exist_ok=True)
        atomic.write_text(directory / FILE, content)
    return directory


def spec_file(path: Path) -> Path:
    """A spec file, or the one spec of a spec directory; named as runtimes read it."""
    path = Path(path)
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES)
        if len(found) != 1:
            raise ClimstackError(
                f"{path} holds {len(found)} CDI specs, not one",
                fix="give the spec file itself",
            )
        path = found[0]
    if path.suffix not in SUFFIXES:
        raise ClimstackError(
            f"{path}: runtimes read only CDI spec files named *.json or *.yaml",
            fix=f"rename it to {path.stem}.json (or .yaml)",
        )
    return path


def load(path: Path) -> dict:
    """A spec file, or the one spec of a spec directory, validated."""
    path = spec_file(path)
    parse = inputs.parse_yaml if path.suffix == ".yaml" else inputs.parse_json
    return validate(parse(path, FIX), path)


def named(spec: dict) -> dict[str, dict]:
    return {d["name"]: d["containerEdits"] for d in spec["devices"]}


@dataclass(frozen=True)
class Applied(Plan):
    """A plan as a runtime given the user's spec `spec` runs it (its mounts, variables and
    device nodes as the reference resolved them); `spec_env`: the variables the spec sets
    (a runtime given it passes only the plan's others: the oracle's)."""

    spec: str = ""
    spec_env: dict[str, str] = field(default_factory=dict)


def judge(plan: Plan, path: Path) -> tuple[list[str], Plan]:
    """(why the spec at `path` does not carry `plan`, the plan as a runtime applying the
    spec runs it: `plan` itself where refused), from the reference's resolution."""
    path = spec_file(path)
    spec, ours = load(path), device_name(plan)
    rejected = reference.errors(path)
    if rejected:
        tag = f"{reference.PIN.name} {reference.PIN.tag}"
        return [f"the reference cdi ({tag}) rejects {path}: {e}" for e in rejected], plan
    if spec["kind"] != KIND:
        return [f"{path} is of kind {spec['kind']}, not climstack's {KIND}"], plan
    if ours not in named(spec):
        return [
            f"{path} describes device {', '.join(named(spec))}, a spec of another plan: "
            f"this plan (site {plan.site}) is device {ours}"
        ], plan
    oci, said = reference.inject(path, device(plan))
    if oci is None:
        return [f"the reference cdi cannot apply {device(plan)} of {path}: {said}"], plan
    found = refusals(plan, spec, oci, path)
    return found, plan if found else applied(plan, oci, path)


def _origin(spec: dict, name: str, key: str, test) -> str:
    """Which containerEdits of the spec hold an entry of `key` that passes `test`."""
    places = {"top-level": spec.get("containerEdits"), f"device {name}'s": named(spec)[name]}
    found = [
        where for where, edits in places.items() if any(map(test, (edits or {}).get(key) or []))
    ]
    return f"its {' and '.join(found)} containerEdits" if found else ""


def _within(text: str, *more: str) -> str:
    """` (a, b)` of the parts given, or nothing."""
    parts = [t for t in (*more, text) if t]
    return f" ({', '.join(parts)})" if parts else ""


def _env(oci: dict) -> dict[str, str]:
    return dict(e.split("=", 1) for e in (oci.get("process") or {}).get("env") or [])


def refusals(plan: Plan, spec: dict, oci: dict, where: Path) -> list[str]:
    """Why `oci` (what `cdi inject` made of the spec at `where` for the plan's device) does
    not carry `plan`: a bind it does not mount, a writable mount, a variable it lacks,
    changes or adds, a preload, a hook, a device node or edit the plan does not have."""
    name, found = device_name(plan), []
    env, wanted = _env(oci), plan.runtime_env()
    mounts = {m["destination"]: m for m in oci.get("mounts") or []}
    mpi = {str(Path(p).parent) for p in plan.mpi.get("libraries", {}).values()}
    for src, dst in plan.binds:
        what = " (the host MPI's directory)" if src in mpi else ""
        if (mounts.get(dst) or {}).get("source") != src:
            found.append(f"{where} does not mount {src} at {dst}{what}, which the plan binds")
    for dst, mount in mounts.items():
        if "ro" not in (mount.get("options") or []):
            origin = _origin(spec, name, "mounts", lambda m: m.get("containerPath") == dst)
            found.append(
                f"{where} mounts {mount.get('source')} at {dst} writable{_within(origin)}, "
                "not read-only (ro)"
            )

    def setting(key):
        return _origin(spec, name, "env", lambda e: e.split("=", 1)[0] == key)

    for key, value in wanted.items():
        if env.get(key) != value:
            found.append(
                f"{where} sets {key}={env.get(key, '(unset)')}{_within(setting(key))}, "
                f"the plan {value}"
            )
    for key in sorted(set(env) - set(wanted)):
        if key == "LD_PRELOAD":
            libraries = [lib for lib in re.split(r"[\s:]+", env[key]) if lib]  # as ld.so
            found += [_preload(plan, lib, where, setting(key)) for lib in libraries or ["''"]]
        else:
            found.append(
                f"{where} sets {key}={env[key]}{_within(setting(key))}, which the plan does not"
            )
    for stage, hooks in sorted((oci.get("hooks") or {}).items()):
        for hook in hooks:
            origin = _origin(spec, name, "hooks", lambda h: h.get("path") == hook.get("path"))
            found.append(
                f"{where} runs hook {hook.get('path')}{_within(origin, stage)}: the plan runs "
                "none (and Apptainer would ignore it)"
            )
    linux = oci.get("linux") or {}
    nodes, planned = {d["path"] for d in linux.get("devices") or []}, set(plan.devices)
    found += [f"{where} adds device node {n}, not the plan's" for n in sorted(nodes - planned)]
    found += [f"{where} lacks the plan's device node {n}" for n in sorted(planned - nodes)]
    others = {
        "additionalGids": ((oci.get("process") or {}).get("user") or {}).get("additionalGids"),
        "intelRdt": linux.get("intelRdt"),
        "netDevices": linux.get("netDevices"),
    }
    found += [f"{where} edits {k} ({v}), which the plan does not" for k, v in others.items() if v]
    return found


def _preload(plan: Plan, lib: str, where: Path, origin: str) -> str:
    """The refusal of a preloaded library: by name, an MPI one as such."""
    head = f"{where} preloads {lib}{_within(origin, 'LD_PRELOAD')}"
    bound = any(PurePosixPath(lib).is_relative_to(dst) for _, dst in plan.binds)
    if MPI_LIBRARY.match(PurePosixPath(lib).name) and not bound:
        return f"{head}: the image's own MPI, loaded ahead of the host MPI the plan binds"
    return f"{head}: loaded ahead of every library the plan binds, which it does not ask for"


def applied(plan: Plan, oci: dict, path: Path) -> Applied:
    """The plan as a runtime applying the spec at `path` runs it: the mounts, variables and
    device nodes the reference resolved (what verify's model then reads) in place of the
    plan's."""
    env = _env(oci)
    spec_env = dict(env)
    library_path = env.pop("LD_LIBRARY_PATH", "")
    return Applied(
        **{f.name: getattr(plan, f.name) for f in fields(Plan)}
        | {
            "binds": [[m["source"], m["destination"]] for m in oci.get("mounts") or []],
            "env": env,
            "separate_env": {},
            "library_path": library_path.split(":") if library_path else [],
            "devices": [d["path"] for d in (oci.get("linux") or {}).get("devices") or []],
        },
        spec=str(path),
        spec_env=spec_env,
    )


def runtime_spec(plan: Plan) -> tuple[Path, dict[str, str]]:
    """(the spec directory a runtime is given, the variables given beside it): a plan
    applied from a user's spec gets that file as it is, in a directory of its own, and the
    variables the plan adds to it (the oracle's); any other plan its own spec."""
    if not (isinstance(plan, Applied) and plan.spec):
        return spec_dir(plan), {}
    given = Path(plan.spec)
    content = given.read_bytes()
    directory = Path(plan.directory) / "cdi" / f"given-{stamp.digest(content, length=10)}"
    if not (directory / given.name).is_file():
        directory.mkdir(parents=True, exist_ok=True)
        partial = directory / f".{given.name}.partial"
        partial.write_bytes(content)  # as judged, byte for byte
        os.replace(partial, directory / given.name)
    env = plan.runtime_env()
    return directory, {k: v for k, v in env.items() if plan.spec_env.get(k) != v}
