"""`climstack registry`: a private OCI registry on loopback, as a centre's would be
(climstack.stack.registry)."""

import os
import time
from pathlib import Path

from climstack.stack.registry import Registry


def register(commands) -> None:
    def run(args):
        registry = Registry(Path(args.directory).resolve(), user=args.user, port=args.port)
        with registry:
            print(f"registry:  {registry.url(args.repository)}  (Ctrl-C stops it)")
            print("client environment (Spack, skopeo, ch-image, apptainer):")
            for name, value in registry.environ().items():
                print(f"  export {name}={value}")
            try:
                while registry.running:
                    time.sleep(1)
            except KeyboardInterrupt:
                pass
        return 0

    sub = commands.add_parser(
        "registry",
        help="serve a private OCI registry on 127.0.0.1 (HTTPS, basic auth) to try "
        "OCI buildcaches and images before a centre's registry",
    )
    sub.add_argument("directory", help="where its storage, certificate and log live")
    sub.add_argument("--port", type=int, help="default: a free port")
    sub.add_argument("--user", default=os.environ.get("USER") or "climstack")
    sub.add_argument("--repository", default="climstack/buildcache")
    sub.set_defaults(run=run)
