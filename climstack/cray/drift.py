"""Has the host's Cray PE moved away from a site scope (`climstack drift`, climstack.cli)?

Every Cray PE external of the scope (as Spack merges it) is compared with the PE installed
under a root: its prefix, the versions installed, the default that `module load` gives, and
its modules; the update it calls for is proposed with the YAML's comments kept.
"""

import io
from dataclasses import dataclass, field
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedSeq

from climstack.common import versions
from climstack.cray import mpich_base
from climstack.cray.cray_pe import COMPONENTS, Component, CrayPe, common_release
from climstack.errors import ClimstackError
from climstack.inputs import sites


@dataclass
class Finding:
    package: str
    external: dict
    component: Component
    pinned: str  #: the component version the external points at
    problems: list[str] = field(default_factory=list)  #: drift (exit 1)
    notes: list[str] = field(default_factory=list)  #: worth knowing, not drift
    proposed: str | None = None  #: the version to move to

    @property
    def line(self) -> str:
        status = "DRIFT " + "; ".join(self.problems) if self.problems else "ok"
        return f"{self.external['spec']:<52} {'; '.join([status] + self.notes)}"


def pinned_version(component: Component, external: dict) -> str | None:
    """The component version in the external's prefix (<install>/<version>/...), or in a
    `<module>/<version>` entry of its modules; None if it is no Cray PE external."""
    prefix = external.get("prefix") or ""
    if prefix.startswith(component.install + "/"):
        return prefix[len(component.install) + 1 :].split("/")[0]
    for module in external.get("modules") or []:
        name, _, version = module.partition("/")
        if name == component.module and version:
            return version
    return None


def pe_externals(site: sites.Site):
    """(package, external, component, pinned version) of each Cray PE external."""
    for package, component in COMPONENTS.items():
        for external in site.externals(package):
            pinned = pinned_version(component, external)
            if pinned is not None:
                yield package, external, component, pinned


def pinned_modules(site: sites.Site) -> dict[str, str]:
    """{module: version} of the scope's Cray PE externals (what its prefixes point at)."""
    return {c.module: v for _, _, c, v in pe_externals(site) if v[:1].isdigit()}


def check(site: sites.Site, pe: CrayPe) -> list[Finding]:
    findings = [Finding(*found) for found in pe_externals(site)]
    for finding in findings:
        _compare(finding, pe)
    if not findings:
        raise ClimstackError(
            f"site {site.name} ({site.path}) has no Cray PE externals",
            fix="drift checks HPE Cray sites: name one whose packages.yaml "
            "has cray-mpich, cray-pmi, ... externals (e.g. archer2)",
        )
    return findings


def _compare(finding: Finding, pe: CrayPe) -> None:
    external, component, pinned = finding.external, finding.component, finding.pinned
    prefix = external.get("prefix") or pe.module_prefix(
        f"{component.module}/{pinned}", component.prefix_variable
    )
    if not pe.exists(prefix):
        finding.problems.append(f"prefix missing: {prefix}")
    if pe.has_module_system():
        for module in external.get("modules") or []:
            if pe.modulefile(module) is None:
                finding.problems.append(f"module missing: {module}")
    if not pinned[:1].isdigit():  # e.g. /opt/cray/xpmem/default: no version to compare
        return
    installed = pe.installed(component)
    newer = [v for v in installed if versions.sort_key(v) > versions.sort_key(pinned)]
    default = pe.module_default(component.module)
    if default is None:
        finding.notes.append(pe.unknown_default(component.module))
    elif default[0] != pinned:
        finding.problems.append(f"default changed: {pinned} -> {default[0]} ({default[1]})")
        finding.proposed = default[0]
    others = [v for v in newer if v != finding.proposed]
    if others:
        finding.notes.append(f"newer installed, not default: {', '.join(others)}")
    if finding.problems and not finding.proposed and installed and pinned not in installed:
        finding.proposed = (newer or installed)[-1]


def consequences(findings: list[Finding], site: sites.Site) -> list[str]:
    """What else moves: a new ANL MPICH base moves the container's MPICH pin."""
    lines = []
    for f in findings:
        if f.package == "cray-mpich" and f.proposed:
            try:
                old, new = _bases(f)
            except ClimstackError as err:
                lines.append(
                    f"cray-mpich {f.pinned} -> {f.proposed}: the container's MPICH pin is not "
                    f"checked: {err.message} (fix: {err.fix})"
                )
                continue
            if _series(old) != _series(new):
                manifest = _container_manifest(site)
                lines.append(
                    f"cray-mpich {f.pinned} -> {f.proposed} changes the ANL MPICH base "
                    f"{old} -> {new}: the container's MPICH pin moves from {_series(old)} to "
                    f"{_series(new)} ({manifest or 'no container environment'}); rebuild the "
                    "image on the new pin and verify it again on the new host (`climstack "
                    "containerize`, `apptainer build`, `climstack verify`)"
                )
    return lines


def _bases(f: Finding) -> tuple[str, str]:
    """The ANL MPICH bases of the pinned and the proposed cray-mpich."""
    return mpich_base.base_of(f.pinned)[0], mpich_base.base_of(f.proposed)[0]


def _series(version: str) -> str:
    return ".".join(map(str, versions.release(version)[:2]))


def project_of(site: sites.Site) -> Path:
    """The project a site scope belongs to: the folder holding its site/ folder."""
    return site.path.parent.parent


def _container_manifest(site: sites.Site) -> Path | None:
    path = project_of(site) / "containers" / site.name / "spack.yaml"
    return path if path.is_file() else None


# -- the proposed update ------------------------------------------------------------------
def _yaml() -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=2, offset=0)
    return yaml


def _dump(yaml: YAML, data) -> str:
    stream = io.StringIO()
    yaml.dump(data, stream)
    return stream.getvalue()


def proposal(site: sites.Site, pe: CrayPe, findings: list[Finding]) -> dict[Path, tuple]:
    """{file: (old text, new text)} for every file the update changes."""
    moves = {f.component.module: (f.pinned, f.proposed) for f in findings if f.proposed}
    scope, default = common_release(pinned_modules(site)), pe.default_cpe()
    if len(scope) == 1 and default and default[0] != scope[0]:  # `cpe/25.09` -> `cpe/26.03`
        moves["cpe"] = (scope[0], default[0])
    yaml, edits = _yaml(), {}
    for f in (f for f in findings if f.proposed):
        where = site.origin(f.external["spec"], "spec").rpartition(":")[0]
        path = Path(where)
        if not path.is_file():
            raise ClimstackError(
                f"cannot tell which file sets {f.external['spec']}",
                fix="edit the site scope by hand",
            )
        if path not in edits:
            edits[path] = _load(yaml, path)
        packages = edits[path][1]["packages"]
        for item in packages[f.package]["externals"]:
            if item["spec"] == f.external["spec"]:
                _update(item, f, pe, moves)
        for language in ("c", "cxx", "fortran"):  # a PrgEnv compiler required by name
            required = (packages.get(language) or {}).get("require") or []
            for i, spec in enumerate(required):
                if spec == f"{f.package}@{f.pinned}":
                    required[i] = f"{f.package}@{f.proposed}"
    pin = _container_pin(site, findings)
    if pin:
        path, text, data = pin
        edits[path] = (text, data)
    return {path: (text, _dump(yaml, data)) for path, (text, data) in edits.items()}


def _load(yaml: YAML, path: Path) -> tuple:
    """(text, data) of a file whose comments and layout survive a round trip."""
    text = path.read_text()
    data = yaml.load(text)
    if _dump(yaml, data) != text:
        raise ClimstackError(
            f"{path} would not keep its layout when rewritten (e.g. `key::` "
            "overrides, folded flow lists)",
            fix="apply the versions of the report above to it by hand",
        )
    return text, data


def _update(item, f: Finding, pe: CrayPe, moves: dict) -> None:
    old, new = f.pinned, f.proposed
    if f"@{old}" in item["spec"]:
        item["spec"] = item["spec"].replace(f"@{old}", f"@{new}", 1)
    if "prefix" in item:
        module = f"{f.component.module}/{new}"
        from_module = pe.modulefile(module) and pe.module_prefix(
            module, f.component.prefix_variable
        )
        was = item["prefix"]
        item["prefix"] = from_module or was.replace(f"/{old}/", f"/{new}/", 1)
        compilers = (item.get("extra_attributes") or {}).get("compilers") or {}
        for language, path in compilers.items():  # compiler paths below the prefix follow it
            compilers[language] = path.replace(was, item["prefix"], 1)
        if not pe.exists(item["prefix"]):
            raise ClimstackError(
                f"the prefix of {f.package} {new} is unknown: " f"{item['prefix']} does not exist",
                fix=f"load {module} on the host and edit the prefix by hand",
            )
    modules = item.get("modules") or []
    for i, module in enumerate(modules):
        name, _, version = module.partition("/")
        if name in moves and version == moves[name][0]:
            modules[i] = f"{name}/{moves[name][1]}"
    item.yaml_add_eol_comment(f"climstack drift: was {old}", "spec")


def _container_pin(site: sites.Site, findings: list[Finding]):
    manifest = _container_manifest(site)
    mpich = next((f for f in findings if f.package == "cray-mpich" and f.proposed), None)
    if not (manifest and mpich):
        return None
    try:
        old, new = map(_series, _bases(mpich))
    except ClimstackError:  # an unknown base: the report's consequence line says so
        return None
    if new == old:
        return None
    text, data = _load(_yaml(), manifest)
    pin = CommentedSeq([f"@{new}"])
    pin.fa.set_flow_style()
    mpich_pin = data["spack"].setdefault("packages", {}).setdefault("mpich", {})
    mpich_pin["require"] = pin
    mpich_pin.yaml_add_eol_comment(f"climstack drift: cray-mpich {mpich.proposed}", "require")
    return manifest, text, data


def unified_diff(edits: dict[Path, tuple], project: Path) -> str:
    import difflib

    chunks = []
    for path, (old, new) in edits.items():
        name = path.relative_to(project) if path.is_relative_to(project) else path
        chunks += difflib.unified_diff(
            old.splitlines(True), new.splitlines(True), f"a/{name}", f"b/{name}"
        )
    return "".join(chunks)


# -- the command ---------------------------------------------------------------------------
def report(site: sites.Site, pe: CrayPe, findings: list[Finding]) -> str:
    release = pe.default_cpe()
    scope = ", ".join(common_release(pinned_modules(site))) or "of mixed releases"
    lines = [
        f"drift: site {site.name} (CPE {scope}) against the Cray PE under {pe.root} (CPE releases "
        f"{', '.join(pe.cpe_releases()) or 'none found'}; default "
        f"{release[0] if release else 'unknown'})"
    ]
    lines += [f"  {f.package:<15} {f.line}" for f in findings]
    lines += [f"  consequence: {line}" for line in consequences(findings, site)]
    if not pe.has_module_system():
        lines.append("  note: no module tree found, modules were not checked")
    if any("default unknown" in note for f in findings for note in f.notes):
        lines.append(
            "  fix for unknown defaults: run drift on a login node (--root /), or give --root "
            "a copy that includes /opt/cray/pe/modulefiles (or lmod/) and /opt/cray/pe/cpe"
        )
    drifted = sum(1 for f in findings if f.problems)
    lines.append(f"{drifted} of {len(findings)} Cray PE externals drifted")
    return "\n".join(lines)
