"""A file-system view: a root directory (the host's `/`, a synthetic tree, or an image
directory) plus bind mounts (container path -> host path), paths resolved as a process
inside it sees them. Symlinks are followed inside the view, with the kernel's hop limit,
so loops end."""

import glob
import os
from pathlib import Path, PurePosixPath

from climstack.bind import glibc_rules
from climstack.errors import ClimstackError

MAX_HOPS = 40  # symlink hops, as the kernel allows


class View:
    """Paths as a process inside `root` (with `binds`) sees them, mapped to host paths."""

    def __init__(
        self, root: Path = Path("/"), binds: dict[str, Path] | None = None, ask: bool = True
    ):
        self.root = Path(root)
        self.ask = ask  # may the view's own ld.so be run here to tell its search rules?
        # longest container path first, so nested binds win
        self.binds = sorted(
            ((PurePosixPath(k), Path(v)) for k, v in (binds or {}).items()),
            key=lambda item: len(item[0].parts),
            reverse=True,
        )

    def _host(self, path: PurePosixPath) -> Path:
        for inside, outside in self.binds:
            if path == inside or inside in path.parents:
                return outside / path.relative_to(inside)
        return self.root / path.relative_to("/")

    def resolve(self, path: str | PurePosixPath) -> tuple[PurePosixPath, Path] | None:
        """(canonical path inside the view, host path) following symlinks in the view;
        None if it does not exist or a symlink loops."""
        current = PurePosixPath("/")
        pending = list(PurePosixPath(os.path.normpath(str(path))).parts[1:])
        hops = 0
        while pending:
            part = pending.pop(0)
            if part == "..":
                current = current.parent
                continue
            candidate = current / part
            host = self._host(candidate)
            try:
                is_link = host.is_symlink()
            except PermissionError as err:
                raise ClimstackError(
                    f"cannot look into {host.parent} (needed for {path}): " "permission denied",
                    fix="run as a user who can read it, or ask the site " "to open it",
                ) from err
            if is_link:
                hops += 1
                if hops > MAX_HOPS:
                    return None
                target = PurePosixPath(os.readlink(host))
                pending = (
                    list(target.parts[1:] if target.is_absolute() else target.parts) + pending
                )
                current = PurePosixPath("/") if target.is_absolute() else current
                continue
            if not os.path.lexists(host) and not any(
                candidate in inside.parents for inside, _ in self.binds
            ):
                return None  # (a mount point's parents exist, as the runtime makes them)
            current = candidate
        return current, self._host(current)

    def is_dir(self, path: str) -> bool:
        found = self.resolve(path)
        return bool(found) and found[1].is_dir()

    def glibc(self, machine: str = "EM_X86_64") -> glibc_rules.Rules:
        """The search rules of the view's own ld.so and ld.so.cache (glibc_rules)."""
        if not self.ask:
            return glibc_rules.of(None, None, machine, "nothing of the image was to run")
        interpreter = glibc_rules.INTERPRETERS.get(machine, "")
        found = self.resolve(interpreter) if interpreter else None
        if not found or not found[1].is_file():
            return glibc_rules.of(
                None, None, machine, f"no {interpreter or machine} in {self.root}"
            )
        cache = self.resolve("/etc/ld.so.cache")
        return glibc_rules.of(found[1], cache[1] if cache else None, machine)

    def ld_so_conf(self) -> list[str]:
        """Directories of /etc/ld.so.conf and its `include` globs, in order (read once)."""
        if getattr(self, "_ld_so_conf", None) is None:
            self._ld_so_conf = self._read_ld_so_conf()
        return self._ld_so_conf

    def _read_ld_so_conf(self) -> list[str]:
        dirs: list[str] = []

        def parse(conf: str, depth: int = 0):
            found = self.resolve(conf)
            if not found or depth > 10 or not found[1].is_file():
                return
            for line in found[1].read_text(errors="replace").splitlines():
                line = line.split("#", 1)[0].strip()
                if line.startswith("include "):
                    for pattern in line.split()[1:]:
                        pattern = pattern if pattern.startswith("/") else f"/etc/{pattern}"
                        matches = glob.glob(str(self._host(PurePosixPath(pattern))))
                        host_root = self._host(PurePosixPath(pattern).parent)
                        for match in sorted(matches):
                            parse(
                                str(
                                    PurePosixPath(pattern).parent
                                    / Path(match).relative_to(host_root)
                                ),
                                depth + 1,
                            )
                elif line.startswith("/"):
                    dirs.append(line)

        parse("/etc/ld.so.conf")
        return dirs
