"""What `climstack verify` found about one executable, and its rendering: the loader's
picks, both sides' MPI, the symbol counts, the remedies, and every reason for refusal."""

from dataclasses import dataclass, field


@dataclass
class Report:
    executable: str
    needed: list[str] = field(default_factory=list)
    rpath: list[str] = field(default_factory=list)
    runpath: list[str] = field(default_factory=list)
    abi: str = ""  # the MPI ABI the executable is built for: mpich, standard (verify.ABIS)
    picks: dict[str, dict] = field(default_factory=dict)  # WATCHED name -> path, rule, host
    image_mpi: str = ""  # MPICH version of what the image would load without the plan
    host_mpi: str = ""
    image_base: str = ""  # the ANL MPICH release each side is built on
    host_base: str = ""
    glibc: str = ""  # the image's C library
    remedy: str = ""  # the plan's RPATH remedy, under which the loader was followed
    starts_mpi: bool = False  # it calls MPI_Init itself (elf.Elf.starts_mpi)
    remedies: dict[str, str] = field(default_factory=dict)  # name -> "" (applies) or why not
    importers: list[str] = field(default_factory=list)  # files whose MPI imports count
    imported: int = 0
    exported: int = 0
    missing: list[str] = field(default_factory=list)  # imported MPI symbols the host lacks
    glibc_missing: list[str] = field(default_factory=list)
    version_missing: list[str] = field(default_factory=list)  # "V of F, needed by G"
    families: dict[str, dict] = field(default_factory=dict)  # run.family_check's reports
    providers: dict[str, int] = field(default_factory=dict)  # file -> MPI symbols bound to it
    oracle: str = ""  # the image's own ld.so: agrees, disagrees, failed, not asked: why
    #: the search rules the model followed: the image's own (ld.so, ld.so.cache) or why not
    rules: str = ""
    #: which of them stood in for the image's own, and why ('' for none): no plain ok then
    rules_stand_in: str = ""
    #: the standard ABI through mpi_abi_wrapper: its libmpiwrapper, the MPI library it is
    #: built against, its imports, those the host lacks, and the image's ld.so on its map
    wrapper: dict = field(default_factory=dict)
    unchecked: list[str] = field(default_factory=list)  # what could not be checked
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Climstack's model refused nothing and checked everything."""
        return not self.problems and not self.unchecked

    @property
    def confirmed(self) -> bool:
        """The image's own ld.so listed the same link map as the model (and libmpiwrapper's,
        where the plan binds the standard ABI through mpi_abi_wrapper)."""
        return (
            self.oracle == ORACLE_AGREES
            and self._wrapper_oracle == ORACLE_AGREES
            and not self.rules_stand_in
        )

    @property
    def _wrapper_oracle(self) -> str:
        """The image's ld.so on libmpiwrapper's map: a wrapper checked but not asked about
        is not confirmed (it once counted as agreement)."""
        if not self.wrapper:
            return ORACLE_AGREES  # no wrapper in the plan: nothing more to confirm
        return self.wrapper.get("oracle") or "not asked"

    @property
    def ok(self) -> bool:
        """Passed and confirmed by the real loader: the only way to print a plain `ok`."""
        return self.passed and self.confirmed

    @property
    def unconfirmed_why(self) -> str:
        """Why the real loader did not confirm the map ('' when it did)."""
        if self.confirmed:
            return ""
        if self.rules_stand_in:
            return f"the model's search rules stood in: {self.rules_stand_in}"
        if self.oracle == ORACLE_AGREES:  # the program's map: libmpiwrapper's was not
            return f"the image's ld.so on libmpiwrapper's link map: {self._wrapper_oracle}"
        asked = self.oracle.removeprefix("not asked: ")
        return asked or "the image's own ld.so was not asked (verify with --image and --plan)"

    @property
    def verdict(self) -> str:
        if self.problems:
            return "refused"
        if self.unchecked:
            return "not checked"
        return "ok" if self.confirmed else f"{MODEL_ALONE}: {self.unconfirmed_why}"

    def refusal(self, model_only: bool = False) -> str:
        """Why a caller about to run the program must not ('' when it may): what was
        refused or not checked, or, unless `model_only` was asked for, that the real loader
        did not confirm the verdict."""
        if self.problems or self.unchecked:
            return "; ".join(self.problems + [f"not checked: {u}" for u in self.unchecked])
        if self.confirmed or model_only:
            return ""
        return (
            f"{MODEL_ALONE}: {self.unconfirmed_why}; the real loader did not confirm the "
            "link map (run where the plan's runtime is on PATH, or accept the model's "
            "verdict with --model-only)"
        )


ORACLE_AGREES = "agrees"
#: the verdict where every check passed but only climstack's model of ld.so says so
MODEL_ALONE = "ok by the model alone"


def render(report: Report) -> str:
    lines = [
        f"executable: {report.executable}",
        f"  DT_NEEDED: {' '.join(report.needed)}",
        f"  DT_RPATH: {':'.join(report.rpath) or '-'}   "
        f"DT_RUNPATH: {':'.join(report.runpath) or '-'}",
    ]
    for name, pick in report.picks.items():
        rule = f"{pick['rule']} of {pick['whose']}" if pick.get("whose") else pick["rule"]
        lines.append(f"  loader picks {name}: {pick['path']} ({rule}) = {pick['host']}")
    lines.append(f"  image MPI: {report.image_mpi or '-'}   host MPI: {report.host_mpi or '-'}")
    if report.abi:
        lines.append(f"  MPI ABI: {report.abi}")
    if report.glibc:
        lines.append(f"  image glibc: {report.glibc}")
    if report.remedies:
        lines.append(
            "  RPATH remedies: "
            + "; ".join(f"{how}: {why or 'applies'}" for how, why in report.remedies.items())
        )
    if report.remedy:
        lines.append(f"  followed under --rpath-remedy {report.remedy}")
    if report.version_missing:
        lines.append(f"  symbol versions missing: {'; '.join(report.version_missing)}")
    lines.append(
        f"  MPI symbols imported: {report.imported} (by {len(report.importers)} "
        f"files), exported by the host MPI: {report.exported}, missing: "
        f"{len(report.missing)}"
    )
    for name, family in report.families.items():
        if "imported" in family:
            lines.append(
                f"  {name}: from the host {' '.join(family['from_host']) or '-'}; symbols "
                f"imported {family['imported']}, exported by the host "
                f"{family['exported']}, missing {len(family['missing'])}"
            )
        if versions := family.get("versions"):
            lines.append(
                f"  HDF5: image {versions['image'] or '?'}, loaded under the plan "
                f"{versions['host'] or '?'} {versions.get('override', '')}".rstrip()
            )
    for path, count in report.providers.items():
        lines.append(f"  MPI symbols bound to {path}: {count}")
    if report.rules:
        lines.append(f"  search rules: {report.rules}")
    if wrapper := report.wrapper:
        lines.append(
            f"  mpi_abi_wrapper: {wrapper['library']}, built against {wrapper['built_against']}; "
            f"its MPI imports {wrapper['imports']}, lacking in the host MPI "
            f"{wrapper['lacking']}; the image's ld.so on its link map: "
            f"{wrapper.get('oracle', 'not asked')}"
        )
    if report.oracle:
        lines.append(f"  the image's own ld.so: {report.oracle}")
    for problem in report.problems:
        lines.append(f"  REFUSED: {problem}")
    for what in report.unchecked:
        lines.append(f"  NOT CHECKED: {what}")
    lines.append(f"verdict: {report.verdict}")
    return "\n".join(lines)
