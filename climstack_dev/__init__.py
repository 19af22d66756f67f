"""What the tests and the benchmarks share: real MPIs from PyPI, programs and images built
against them, a synthetic Cray PE tree (programs), and isolated Spack centres (centre).
The scripts run in Spack's Python (climstack.spack.Spack.python) are lock_hashes.py and
in_spack.py."""

from pathlib import Path

#: the tests' questions to Spack's Python (compilers, clingo, pins): Spack.python(IN_SPACK, ...)
IN_SPACK = Path(__file__).parent / "in_spack.py"
LOCK_HASHES = Path(__file__).parent / "lock_hashes.py"
