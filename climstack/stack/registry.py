"""A private OCI registry on loopback, as a centre's Harbor or GitLab registry would be:
Debian's `docker-registry` (the CNCF distribution registry 2.8), serving HTTPS with a
self-signed certificate made at start and basic auth (a bcrypt htpasswd), its blobs in a
directory. The tests, the benchmark and `climstack registry serve` start one; clients trust
it through SSL_CERT_FILE (Spack's `config:ssl_certs` default, Go's and Python's) and log in
with CLIMSTACK_OCI_USER / CLIMSTACK_OCI_TOKEN (the variables our mirrors name)."""

import os
import re
import secrets
import shutil
import socket
import ssl
import time
import urllib.error
import urllib.request
from base64 import b64encode
from pathlib import Path

import bcrypt
import yaml

from climstack.common import process
from climstack.errors import ClimstackError, ToolFailure

USERNAME_VARIABLE, PASSWORD_VARIABLE = "CLIMSTACK_OCI_USER", "CLIMSTACK_OCI_TOKEN"


def credentials() -> tuple[str, str] | None:
    """(user, password) from the client environment, when both are set."""
    user, password = os.environ.get(USERNAME_VARIABLE), os.environ.get(PASSWORD_VARIABLE)
    return (user, password) if user and password else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Registry:
    """docker-registry with its storage under `root` (root/storage, kept), started by `with
    Registry(root) as registry:` and stopped on leaving. Its certificate, credentials, config
    and log are this instance's own (root/runs/<pid>-<token>, removed at stop), so that two
    runs may serve one storage at once (a developer's tests beside CI's) without one's new
    password refusing the other's clients."""

    def __init__(self, root: Path, user: str = "centre-a", port: int | None = None):
        self.root, self.user = root, user
        self.password = secrets.token_urlsafe(18)
        self.port = port or free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.state = root / "runs" / f"{os.getpid()}-{secrets.token_hex(4)}"
        self.ca = self.state / "registry-cert.pem"
        self.storage = root / "storage"
        self.log = self.state / "registry.log"
        self._process: process.Popen | None = None

    def url(self, repository: str = "climstack/buildcache") -> str:
        return f"oci://{self.host}/{repository}"

    def environ(self, password: str | None = None) -> dict:
        """What a client needs in its environment: the CA and the credentials."""
        return {
            "SSL_CERT_FILE": str(self.ca),
            USERNAME_VARIABLE: self.user,
            PASSWORD_VARIABLE: self.password if password is None else password,
        }

    def _configure(self) -> Path:
        docker_registry = shutil.which("docker-registry")
        if not docker_registry:
            raise ClimstackError(
                "no `docker-registry` on PATH", fix="apt-get install docker-registry (bin/setup)"
            )
        self.state.mkdir(parents=True, exist_ok=True)
        key = self.state / "registry-key.pem"
        process.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
            + ["-nodes", "-days", "30", "-subj", "/CN=climstack loopback registry"]
            + ["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]
            + ["-keyout", key, "-out", self.ca],
            "self-signed certificate for the registry",
        )
        hashed = bcrypt.hashpw(self.password.encode(), bcrypt.gensalt(rounds=10)).decode()
        (self.state / "htpasswd").write_text(f"{self.user}:{hashed}\n")
        config = {
            "version": 0.1,
            "log": {"level": "info", "fields": {"service": "registry"}},
            "storage": {"filesystem": {"rootdirectory": str(self.storage)}},
            "http": {
                "addr": self.host,
                "tls": {"certificate": str(self.ca), "key": str(key)},
            },
            "auth": {"htpasswd": {"realm": "climstack", "path": str(self.state / "htpasswd")}},
        }
        path = self.state / "config.yml"
        path.write_text(yaml.safe_dump(config))
        return path

    def start(self, timeout: float = 20) -> "Registry":
        config = self._configure()
        self._process = process.daemon(["docker-registry", "serve", config], self.log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                break
            if self.status("/v2/") == 200:
                return self
            time.sleep(0.2)
        log = self.log.read_text()[-1500:] if self.log.is_file() else ""
        self.stop()
        raise ToolFailure(
            f"docker-registry on {self.host} did not come up; its log ended:\n{log}",
            fix="another process may hold the port; start it again (a new port is chosen)",
        )

    def status(self, path: str, password: str | None = None) -> int:
        """The HTTP status of GET https://host/path with our credentials."""
        login = f"{self.user}:{self.password if password is None else password}"
        request = urllib.request.Request(
            f"https://{self.host}{path}",
            headers={"Authorization": "Basic " + b64encode(login.encode()).decode()},
        )
        context = ssl.create_default_context(cafile=self.ca)
        try:
            with urllib.request.urlopen(request, context=context, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as err:
            return err.code
        except (urllib.error.URLError, OSError):
            return 0

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        process.stop(self._process)
        self._process = None
        shutil.rmtree(self.state, ignore_errors=True)  # the credentials go with the server

    def __enter__(self) -> "Registry":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def stored_blobs(self) -> dict[str, int]:
        """digest -> size of every blob the registry holds (what was transferred to it)."""
        blobs = self.storage / "docker" / "registry" / "v2" / "blobs" / "sha256"
        return {p.parent.name: p.stat().st_size for p in blobs.glob("*/*/data")}

    def served_blobs(self) -> list[str]:
        """Digests of the blobs this run has sent (GET .../blobs/sha256:D, in its log's
        order, repeats kept): what clients really pulled, whatever their caches hold."""
        text = self.log.read_text(errors="replace") if self.log.is_file() else ""
        return SERVED_BLOB.findall(text)


#: a GET of a blob that completed, in the registry's request log (logrus's text format:
#: fields in alphabetical order, so the method comes before the URI)
SERVED_BLOB = re.compile(
    r'msg="response completed".*http\.request\.method=GET .*'
    r'http\.request\.uri="/v2/[^"]+/blobs/sha256:([0-9a-f]{64})"'
)
