"""Run by `spack python lock_hashes.py LOCKFILE...`: prints, as JSON, per lockfile the nodes
whose recorded DAG hash is not the one Spack computes from the node as recorded.

A lockfile should round-trip: Spack v1.1.0 hashed external specs before giving them their
namespace (fixed in v1.1.1, spack/spack#51708), so its lockfiles record hashes that no
Spack, itself included, derives from their content.
"""

import json
import sys

import spack.spec


def recomputed(nodes: list[dict], root: dict) -> str:
    """The DAG hash of `root` recomputed from the recorded nodes (its own and its deps')."""
    others = [node for node in nodes if node is not root]
    spec = spack.spec.Spec.from_dict({"spec": {"_meta": {"version": 5}, "nodes": [root, *others]}})
    for node in spec.traverse():
        node._hash = None  # forget the recorded hashes: compute each from its content
    return spec.dag_hash()


def mismatches(path: str) -> list[str]:
    lock = json.loads(open(path).read())
    nodes = [dict(node, hash=digest) for digest, node in lock["concrete_specs"].items()]
    return [
        f"{node['name']}/{node['hash'][:7]}"
        for node in nodes
        if recomputed(nodes, node) != node["hash"]
    ]


if __name__ == "__main__":
    print(json.dumps({path: mismatches(path) for path in sys.argv[1:]}))
