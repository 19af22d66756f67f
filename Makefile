# The two commands a newcomer needs (see README.md):
#   make local   set up, concretize every environment, emit the container recipes,
#                install and run the local smoke slice; build the ARCHER2 image and,
#                side by side, the whole local environment (stack + OSU, mpiBench,
#                NetCDF-Bench, benchio, MOM6) from offline sources and the CCE stand-in;
#                build the image's SIF
#                (Apptainer runs the recipe's %test: image check + mpi-probe) and run
#                mpi-probe in them on 2 ranks, bind mode, under Charliecloud, Apptainer and podman;
#                push the probes as images to a loopback OCI registry and run mpi-probe's
#                image from it (ch-image pull), bind mode; run the benchmarks natively and
#                in the image (bind, bind-noxpmem, bind-host-netcdf, hybrid, fabric), alone,
#                and write the report to the path it prints; the MPI-5 ABI image (built
#                beside the ARCHER2 image) then runs on the host MPIs
#   make test    set up, run the test suite
.PHONY: setup local test bench

setup:
	bin/setup

# the tasks of climstack/workflow.py (setup first: it needs only the system's python3),
# each reusing what its inputs' stamps find cached; it ends with each task's start, wall and
# CPU seconds
local:
	CLIMSTACK_STEPS_PATH="$$PATH" python3 -m climstack.workflow local

# one pytest process per CPU, each running whole modules (module fixtures built once), in
# the order tests/conftest.py gives them (not xdist's largest-module-first)
test: setup
	.venv/bin/python -m pytest -v -rfEs -n $(shell nproc) --dist loadfile --no-loadscope-reorder --durations=20 tests

bench: setup
	.venv/bin/python benchmarks/concretize_times.py
	.venv/bin/python benchmarks/bind_vs_native.py
	.venv/bin/python benchmarks/bench_modes.py
	.venv/bin/python benchmarks/plugin_parity.py
	.venv/bin/python benchmarks/podman_launch.py
	.venv/bin/python benchmarks/buildcache_speedup.py
	.venv/bin/python benchmarks/buildcache_speedup.py --registry
	.venv/bin/python benchmarks/workflow_times.py
	.venv/bin/python benchmarks/abi_matrix.py
	.venv/bin/python benchmarks/abi_call_cost.py
	bin/climstack bench scale
	.venv/bin/python benchmarks/mpich_suite.py
