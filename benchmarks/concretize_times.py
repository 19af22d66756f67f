"""Print wall times: fresh offline concretization of every environment, and warm setup.

Goals (issue 2): <= 60 s per environment on a 2-core machine, <= 10 s for bin/setup with a
warm cache. Run with `make bench` or `.venv/bin/python benchmarks/concretize_times.py`.
"""

import os
import subprocess
import time

from climstack import pins
from climstack.build import environments

os.environ["SPACK_DISABLE_LOCAL_CONFIG"] = "1"


def main() -> None:
    start = time.monotonic()
    subprocess.run(
        [str(pins.PROJECT_ROOT / "bin" / "setup")],
        check=True,
        env={**os.environ, "CLIMSTACK_NO_APT": "1"},
        capture_output=True,
    )
    print(f"setup (warm cache): {time.monotonic() - start:.1f} s  (goal <= 10 s)")
    for name, env_dir in environments.find_environments().items():
        print(
            f"concretize --fresh {name}: {environments.concretize(env_dir):.1f} s  "
            "(goal <= 60 s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
