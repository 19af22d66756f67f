"""Run by `spack -e ENV python` (not imported by climstack): one JSON list of what the active
environment fetches, per concrete spec with code, per resource and per patch fetched from a
URL: its pinned sha256 and its paths in a mirror (digest path first, then the
human-readable alias, as Spack's stages name them).
climstack.stack.sources.source_mirror fills mirrors with it."""

import json
import os

import spack.llnl.util.filesystem as fsys

import spack.environment as ev
import spack.fetch_strategy as fs
import spack.mirrors.layout as layout

out = []
for spec in ev.active_environment().all_specs():
    if spec.external or not spec.package.has_code:
        continue
    fetcher = spec.package.fetcher
    entry = {
        "spec": spec.format("{name}@{version}/{hash:7}"),
        "name": spec.name,
        "version": str(spec.version),
        "hash": spec.dag_hash(),
        "url": getattr(fetcher, "url", None),
        "sha256": None,
        "paths": [],
    }
    if isinstance(fetcher, fs.URLFetchStrategy) and len(fetcher.digest or "") == 64:  # sha256
        entry["sha256"] = fetcher.digest
        alias = os.path.join(spec.name, spec.format_path("{name}-{version}"))
        entry["paths"] = list(layout.default_mirror_layout(fetcher, alias, spec))
    out.append(entry)
    for resource in spec.package._get_needed_resources():  # as PackageBase stages them
        fetcher = resource.fetcher
        if not isinstance(fetcher, fs.URLFetchStrategy) or len(fetcher.digest or "") != 64:
            continue
        alias = os.path.join(spec.name, fsys.polite_filename(f"{resource.name}-{spec.version}"))
        out.append(
            {
                "spec": f"{entry['spec']} resource {resource.name}",
                "name": spec.name,
                "version": entry["version"],
                "hash": entry["hash"],
                "url": fetcher.url,
                "sha256": fetcher.digest,
                "paths": list(layout.default_mirror_layout(fetcher, alias)),
            }
        )
    for patch in spec.patches:  # patches fetched from a URL need the mirror too
        if getattr(patch, "url", None):
            ref = os.path.join(patch.owner.split(".")[-1], os.path.basename(patch.url))
            out.append(
                {
                    "spec": f"{entry['spec']} patch {patch.url}",
                    "name": spec.name,
                    "version": entry["version"],
                    "hash": entry["hash"],
                    "url": patch.url,
                    "sha256": patch.archive_sha256 or patch.sha256,
                    "paths": list(layout.default_mirror_layout(patch.fetcher(), ref)),
                }
            )
print(json.dumps(out))
