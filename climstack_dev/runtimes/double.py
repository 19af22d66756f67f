"""A test double of a container runtime, for tests/test_runtimes_plugin.py: no container;
each rank runs its command on the host through `env`, with the image and the binds in
variables and the plan's environment set. climstack's registry finds it as it finds every
runtime module, with this folder on CLIMSTACK_RUNTIME_PATH; nothing else names it."""

import shlex
from pathlib import Path

from climstack.errors import ClimstackError
from climstack.launch.runtimes.base import Runtime


class Double(Runtime):
    name = "double"
    separators = ";="
    image_format = "directory"

    def _variables(self, plan, image: str, joined: bool = False) -> list[str]:
        self.check_bind_paths(plan)
        binds = ";".join(f"{src}={dst}" for src, dst in plan.binds)
        env = plan.runtime_env(joined=joined)
        return [
            f"DOUBLE_IMAGE={image}",
            f"DOUBLE_BINDS={binds}",
            *(f"{k}={v}" for k, v in env.items()),
        ]

    def exec_args(
        self, plan, image: str, command: list[str], join: int = 0, cwd=None
    ) -> list[str]:
        return [
            "env",
            *(["-C", cwd] if cwd else []),
            *self._variables(plan, image, bool(join)),
            *command,
        ]

    def exports(self, plan) -> str:
        return "".join(f"export {shlex.quote(v)}\n" for v in self._variables(plan, "-"))

    def job_lines(self, plan, image: str, command: list[str]) -> tuple[list[str], str]:
        return self.exports(plan).splitlines(), shlex.join(
            ["env", f"DOUBLE_IMAGE={image}", *command]
        )

    def check_image(self, plan, image: Path) -> None:
        if not (image / "double-ready").exists():
            raise ClimstackError(f"{image} is not prepared", fix="prepare_image")

    def prepare_image(self, plan, image: Path) -> list[str]:
        (image / "double-ready").touch()
        return ["double-ready"]
