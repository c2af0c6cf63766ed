"""Refresh the vendored ClearURLs rules (pipeline/news/data/clearurls/) from their repository.

The tracking-parameter rules are the community-kept ClearURLs rule set
(LGPL-3.0). They are vendored rather than read from another project's
installed package, so that what the pipeline removes changes only when
this script is run and its diff reviewed. It downloads ``data.min.json`` and
``LICENSE`` at one commit of https://github.com/ClearURLs/Rules (a branch or
tag is resolved to its commit first), checks that every provider compiles
as :mod:`qsite.pipeline.news.tracking` reads it, and writes the two files and a
``SOURCE`` note naming the commit and the data's SHA-256.

Usage: ``.venv/bin/python tools/refresh_clearurls.py [REF]`` (default ``master``);
then run ``tests/test_urls.py`` and ``tests/test_normalise.py`` and review the diff.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import httpx

REPOSITORY = "ClearURLs/Rules"
FOLDER = Path(__file__).resolve().parent.parent / "pipeline" / "news" / "data" / "clearurls"

SOURCE = """\
ClearURLs rules (https://docs.clearurls.xyz/latest/specs/rules/), LGPL-3.0 (LICENSE here).
Written by tools/refresh_clearurls.py; read by pipeline/news/tracking.py. Do not edit by hand.
repository: https://github.com/{repository}
commit: {commit}
committed: {committed}
file: data.min.json
sha256: {sha256}
"""


def resolve(client: httpx.Client, ref: str) -> tuple[str, str]:
    """The commit ``ref`` names, and when it was committed (GitHub's API)."""
    response = client.get(f"https://api.github.com/repos/{REPOSITORY}/commits/{ref}")
    response.raise_for_status()
    body = response.json()
    return body["sha"], body["commit"]["committer"]["date"]


def download(client: httpx.Client, commit: str, name: str) -> bytes:
    response = client.get(f"https://raw.githubusercontent.com/{REPOSITORY}/{commit}/{name}")
    response.raise_for_status()
    return response.content


def check(data: bytes) -> int:
    """How many providers ``data`` holds; raises ValueError naming the provider that does not compile."""
    sys.path.insert(0, str(FOLDER.parents[3]))
    from qsite.pipeline.news.tracking import Provider

    providers = json.loads(data)["providers"]
    for name, rules in providers.items():
        try:
            Provider.from_rules(name, rules)
        except Exception as exc:
            raise ValueError(f"data.min.json: provider {name!r} does not compile: {exc}") from exc
    return len(providers)


def main(ref: str = "master") -> None:
    with httpx.Client(timeout=30, follow_redirects=True) as client:
        commit, committed = resolve(client, ref)
        data = download(client, commit, "data.min.json")
        licence = download(client, commit, "LICENSE")
    count = check(data)
    (FOLDER / "data.min.json").write_bytes(data)
    (FOLDER / "LICENSE").write_bytes(licence)
    sha256 = hashlib.sha256(data).hexdigest()
    (FOLDER / "SOURCE").write_text(SOURCE.format(repository=REPOSITORY, commit=commit, committed=committed, sha256=sha256))
    print(f"ClearURLs rules at {commit} ({committed}): {count} providers, sha256 {sha256}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
