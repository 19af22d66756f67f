"""`climstack install`: fill the offline source mirror and install a whole environment, the
stack, its benchmarks and the model (climstack.stack.install: what `bench local`
runs natively on)."""

from climstack.stack import environments, install


def register(commands) -> None:
    def run(args):
        env_dir = environments.resolve(args.environment)
        environments.check(env_dir)  # site and scopes, before Spack installs anything
        for name, prefix in sorted(install.install(env_dir).items()):
            print(f"{name} {prefix}")

    sub = commands.add_parser(
        "install",
        help="fill the offline source mirror and install the whole environment (the stack, "
        "the benchmarks, the model)",
    )
    sub.add_argument("environment", nargs="?", default="local")
    sub.set_defaults(run=run)
