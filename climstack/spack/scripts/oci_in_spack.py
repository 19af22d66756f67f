"""Signatures for OCI buildcaches, run inside Spack (`spack [-e ENV] python` this file).

Spack 1.1 pushes OCI buildcaches unsigned ("Code signing is currently not supported for
OCI images"), so a centre signs what it pushed: per spec image, a clearsigned statement
(`spack gpg` key) of the manifest digest its tag points to, stored beside it as an OCI
artifact tagged `sha256-<hex>.sig` (cosign's convention). The manifest pins the spec's
config and tarball by digest, and Spack checks both on download, so the signed digest
covers the whole binary. Registry access goes through Spack's own OCI client (TLS from
`config:ssl_certs`, credentials from the mirror's access_pair, basic or token auth).

Actions, each printing one JSON line last:
  check URL             the cache's index: its HTTP status (200, 401, 404, ...)
  sign URL KEY SITE     sign every installed, non-external spec of the active environment
  verify URL            the index's status, then the signatures of the active environment's specs
  list URL              every spec in the cache, with the site and signer its statement names
"""

import hashlib
import json
import sys
import tempfile
import urllib.error
from pathlib import Path
from urllib.request import Request

import spack.binary_distribution as bd
import spack.environment
import spack.oci.oci
import spack.oci.opener
import spack.spec
import spack.util.gpg
from spack.oci.image import Digest, ImageReference

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
SIGNATURE = "application/vnd.climstack.signature.v1+pgp"
EMPTY = b"{}"  # the OCI empty descriptor's content


def fetch(url: str, accept: str = MANIFEST) -> bytes:
    request = Request(url, headers={"Accept": accept})
    with spack.oci.opener.urlopen(request) as response:
        return response.read()


def manifest_digest(ref: ImageReference) -> str:
    return "sha256:" + hashlib.sha256(fetch(ref.manifest_url())).hexdigest()


def signature_ref(image: ImageReference, digest: str) -> ImageReference:
    return image.with_tag(digest.replace(":", "-") + ".sig")


def env_specs(installed_only: bool):
    env = spack.environment.active_environment()
    specs = {s.dag_hash(): s for s in env.all_specs() if not s.external}
    return [s for s in specs.values() if s.installed or not installed_only]


def check(url: str) -> dict:
    image = ImageReference.from_url(url)
    try:
        fetch(image.with_tag(bd.default_index_tag).manifest_url())
        return {"status": 200}
    except urllib.error.HTTPError as err:
        return {"status": err.code, "reason": str(err.reason)}


def sign(url: str, key: str, site: str) -> dict:
    image, signed = ImageReference.from_url(url), []
    with tempfile.TemporaryDirectory() as work:
        for spec in env_specs(installed_only=True):
            ref = image.with_tag(bd._oci_default_tag(spec))
            digest = manifest_digest(ref)
            if statement_of(image, digest).get("site") == site:
                continue  # signed before: an unchanged image moves no blob
            statement = Path(work, "statement.json")
            statement.write_text(
                json.dumps(
                    {
                        "reference": f"{ref.domain}/{ref.name}:{ref.tag}",
                        "manifest": digest,
                        "spec": spec.format("{name}@{version}/{hash}"),
                        "target": str(spec.target),
                        "os": spec.os,
                        "site": site,
                    },
                    indent=1,
                )
            )
            envelope = Path(work, "statement.json.asc")
            envelope.unlink(missing_ok=True)
            spack.util.gpg.sign(key, str(statement), str(envelope), clearsign=True)
            signed.append(upload_signature(signature_ref(image, digest), envelope.read_bytes()))
    return {"signed": signed}


def upload_signature(ref: ImageReference, data: bytes) -> str:
    blobs = []
    for content in (EMPTY, data):
        with tempfile.NamedTemporaryFile() as blob:
            blob.write(content)
            blob.flush()
            digest = Digest.from_sha256(hashlib.sha256(content).hexdigest())
            spack.oci.oci.upload_blob(ref, blob.name, digest)
            blobs.append({"digest": str(digest), "size": len(content)})
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", **blobs[0]},
        "layers": [{"mediaType": SIGNATURE, **blobs[1]}],
    }
    spack.oci.oci.upload_manifest(ref, manifest)
    return ref.tag


def statement_of(image: ImageReference, digest: str, tag: str = "") -> dict:
    """The verified statement signed for a manifest digest (served under tag), or
    {"problem": why}."""
    ref = signature_ref(image, digest)
    try:
        layer = json.loads(fetch(ref.manifest_url()))["layers"][0]
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return {"problem": f"unsigned: no signature {ref.tag} in the registry"}
        raise
    data = fetch(ref.blob_url(layer["digest"]), accept=layer["mediaType"])
    with tempfile.NamedTemporaryFile(suffix=".asc") as envelope:
        envelope.write(data)
        envelope.flush()
        try:
            spack.util.gpg.verify(envelope.name, suppress_warnings=True)
        except Exception:
            return {"problem": "signature could not be verified: unknown key or altered"}
    text = data.decode()
    body = text[text.index("{") : text.rindex("}") + 1]
    statement = json.loads(body)
    if statement.get("manifest") != digest:
        return {"problem": f"signed for {statement.get('manifest')}, registry serves {digest}"}
    if tag and not statement.get("reference", "").endswith(f":{tag}"):
        return {"problem": f"the registry serves the image signed for {statement['spec']}"}
    return statement


def verify(url: str) -> dict:
    index = check(url)
    if index["status"] != 200:
        return index
    image, ok, problems = ImageReference.from_url(url), [], []
    for spec in env_specs(installed_only=False):
        ref = image.with_tag(bd._oci_default_tag(spec))
        name = spec.format("{name}@{version}/{hash:7}")
        try:
            statement = statement_of(image, manifest_digest(ref), ref.tag)
        except urllib.error.HTTPError as err:
            if err.code != 404:
                raise
            problems.append({"spec": name, "reference": ref.tag, "problem": "not in the cache"})
            continue
        if "problem" in statement:
            problems.append({"spec": name, "reference": ref.tag, **statement})
        else:
            ok.append({"spec": name, "site": statement["site"]})
    return {"status": 200, "ok": ok, "problems": problems}


def listing(url: str) -> dict:
    image, specs = ImageReference.from_url(url), []
    for tag in spack.oci.oci.list_tags(image):
        if not bd.tag_is_spec(tag):
            continue
        digest = manifest_digest(image.with_tag(tag))
        _, config = spack.oci.oci.get_manifest_and_config(image.with_tag(tag), recurse=0)
        spec = spack.spec.Spec.from_dict(config)
        statement = statement_of(image, digest, tag)
        specs.append(
            {
                "name": spec.name,
                "version": str(spec.version),
                "hash": spec.dag_hash(),
                "os": spec.os,
                "target": str(spec.target),
                "mpi": [d.format("{name}@{version}") for d in spec.dependencies(virtuals=["mpi"])],
                "site": statement.get("site", "-"),
                "signature": statement.get("problem", "verified"),
            }
        )
    return {"specs": specs}


ACTIONS = {"check": check, "sign": sign, "verify": verify, "list": listing}

if __name__ == "__main__":
    action, *args = sys.argv[1:]
    try:
        result = ACTIONS[action](*args)
    except urllib.error.HTTPError as err:
        result = {"error": f"HTTP {err.code} {err.reason}", "status": err.code, "url": err.url}
    except urllib.error.URLError as err:
        result = {"error": str(err.reason), "status": 0}
    print(json.dumps(result))
