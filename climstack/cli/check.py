"""`climstack check`: the project's Spack environments, their site and scopes, checked by
Spack's schema without a solve (climstack.stack.environments.check), beside check/, which
holds the checks of images and plans (verify, parity, the smokes)."""

from climstack.stack.environments import check, find_environments, resolve


def register(commands) -> None:
    def run(args):
        for name in args.environments or find_environments():
            print(f"{name}: ok (site {check(resolve(name))})")

    sub = commands.add_parser("check", help="check environments' site and scopes")
    sub.add_argument("environments", nargs="*", help="names or directories (default: all)")
    sub.set_defaults(run=run)
