"""`climstack buildcache`: signing keys, push, install and list, for a filesystem, HTTPS or S3
buildcache (climstack.stack.buildcache) or an OCI registry (climstack.stack.oci_cache),
chosen by the URL."""

from pathlib import Path

from climstack.errors import ClimstackError
from climstack.stack import buildcache, environments, oci_cache, signing
from climstack.stack.buildcache import env_from_lock, mirror_url, select


def _for(url: str):
    """The module that handles this URL's kind of cache."""
    return oci_cache if oci_cache.is_oci(url) else buildcache


def register(commands) -> None:
    sub = commands.add_parser(
        "buildcache",
        help="share builds between centres: signing keys, "
        "push to a buildcache, install from it, list it",
    )
    actions = sub.add_subparsers(dest="action", required=True)

    key = actions.add_parser("key", help="`spack gpg`: create, export or trust a signing key")
    key_actions = key.add_subparsers(dest="key_action", required=True)
    create = key_actions.add_parser("create", help="create this centre's signing key")
    create.add_argument("name")
    create.add_argument("email")
    create.add_argument(
        "--public",
        default="keys/climstack.pub",
        help="where to export the public key (default: %(default)s)",
    )
    create.add_argument("--secret", help="also export the secret key here (keep it out of git)")
    create.set_defaults(
        run=lambda a: signing.gpg_create(
            a.name, a.email, Path(a.public), Path(a.secret) if a.secret else None
        )
    )
    export = key_actions.add_parser("export", help="export public (or --secret) keys")
    export.add_argument("dest")
    export.add_argument("--secret", action="store_true")
    export.set_defaults(run=lambda a: signing.gpg_export(Path(a.dest), a.secret))
    trust = key_actions.add_parser("trust", help="import another centre's public key")
    trust.add_argument("keyfile")
    trust.set_defaults(run=lambda a: signing.gpg_trust(Path(a.keyfile)))

    def run_push(args):
        env_dir, url = environments.resolve(args.environment), mirror_url(args.mirror)
        if args.base_image and not oci_cache.is_oci(url):
            raise ClimstackError(
                f"--base-image {args.base_image}: images are made only in OCI registries, "
                f"not in {url}",
                fix="push to oci://HOST/REPOSITORY, or leave out --base-image",
            )
        options = {"base_image": args.base_image} if args.base_image else {}
        pushed = _for(url).push(env_dir, url, args.key, args.unsigned, args.force, **options)
        print(pushed, end="")

    push_cmd = actions.add_parser(
        "push",
        help="push an environment's installed specs, signed, " "and update the cache's index",
    )
    push_cmd.add_argument("environment")
    push_cmd.add_argument("mirror", help="directory, file://, https:// or oci:// URL")
    push_cmd.add_argument("--key", help="signing key fingerprint (default: the only one)")
    push_cmd.add_argument("--unsigned", action="store_true", help="push without signing")
    push_cmd.add_argument("--force", action="store_true", help="replace tarballs in the cache")
    push_cmd.add_argument(
        "--base-image",
        help="OCI only: make each spec a runnable image on this base "
        "(e.g. HOST/climstack/debian:12, see `climstack dev base-image`)",
    )
    push_cmd.set_defaults(run=run_push)

    def run_install(args):
        url = mirror_url(args.mirror)
        buildcache.check_reachable(url)
        env_dir = env_from_lock(Path(args.lock), Path(args.into))
        print(_for(url).install(env_dir, url, args.unsigned), end="")

    install_cmd = actions.add_parser(
        "install", help="install another centre's lockfile from " "the buildcache only"
    )
    install_cmd.add_argument("lock", help="the building centre's spack.lock")
    install_cmd.add_argument("mirror", help="directory, file://, https:// or oci:// URL")
    install_cmd.add_argument("--into", required=True, help="environment directory to create")
    install_cmd.add_argument(
        "--unsigned", action="store_true", help="accept unsigned binaries (no signature check)"
    )
    install_cmd.set_defaults(run=run_install)

    def run_list(args):
        url = mirror_url(args.mirror)
        specs = _for(url).contents(url)
        lock = None
        if args.environment:
            lock = environments.resolve(args.environment) / "spack.lock"
            if not lock.is_file():
                raise ClimstackError(f"no {lock}", fix=f"climstack concretize {args.environment}")
        for s in sorted(select(specs, args.target, lock), key=lambda s: (s["target"], s["name"])):
            mpi = f"  ^{s['mpi'][0]}" if s["mpi"] else ""
            site = f"  site {s['site']} ({s['signature']})" if "site" in s else ""
            print(
                f"{s['os']}-{s['target']}  {s['name']}@{s['version']}/{s['hash'][:7]}{mpi}{site}"
            )

    list_cmd = actions.add_parser("list", help="what a buildcache holds, per target/environment")
    list_cmd.add_argument("mirror")
    list_cmd.add_argument("--target", help="only this target (e.g. zen2, zen3, x86_64)")
    list_cmd.add_argument(
        "--environment",
        help="only specs of this environment's lockfile "
        "(a site: local, archer2, gaea-c6, container-...)",
    )
    list_cmd.set_defaults(run=run_list)
