"""`climstack dev base-image`: push our Debian 12 base as an OCI image to a registry, the base
`climstack buildcache push --base-image` builds runnable images on (climstack.image.base_image)."""

from climstack.image.base_image import push


def register(commands) -> None:
    sub = commands.add_parser(
        "base-image",
        help="push our Debian 12 base to a registry, for `buildcache push --base-image`",
    )
    sub.add_argument(
        "reference", help="HOST[:PORT]/REPOSITORY[:TAG], e.g. registry/climstack/debian:12"
    )
    sub.set_defaults(run=lambda args: print(push(args.reference)))
