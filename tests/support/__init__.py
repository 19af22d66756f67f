"""What the tests and the benchmarks share: real MPIs from PyPI, programs and images built
against them, a synthetic Cray PE tree (programs), and isolated Spack centres (centre)."""
