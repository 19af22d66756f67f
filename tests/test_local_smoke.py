"""The local environment really installs its smoke slice and runs it on Debian's MPICH."""

from climstack import environments, smoke


def test_local_smoke_slice_runs_on_debian_mpich(concretized):
    concretized("local")
    prefix = smoke.install(environments.resolve("local"))
    output = smoke.run_probe(prefix, ranks=2)
    assert "library: MPICH Version:\t4.0.2" in output
    assert "ranks: 2" in output
    assert "libmpich.so.12" in output  # the loaded file, from dladdr
