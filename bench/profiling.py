"""Profiles for ``bench/profile.sh``: py-spy under load, summed up by function and by layer."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from bench.servers import run_wrk

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def py_spy_record(output: Path, rest: list[str]) -> list[str]:
    py_spy = shutil.which("py-spy") or str(BIN / "py-spy")
    if not Path(py_spy).exists() and not shutil.which(py_spy):
        raise SystemExit("bench: py-spy is not installed; run bench/profile.sh, which installs it")
    return [py_spy, "record", "--format", "raw", "--rate", "250", "-o", str(output), *rest]


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


#: Where a sample's time goes, by layer: the first rule matching the stack
#: (or, for ``leaf:`` rules, its innermost frame) names it.
LAYERS = [
    ("imports", ("_find_and_load",)),
    ("fair-use limiter (FairUse.hit)", ("limits/", "FairUse.hit")),
    # Datasette runs SQL on a thread pool.
    ("thread pool hand-offs", ("leaf:concurrent/futures/thread.py", "leaf:threading.py")),
    ("feedparser", ("feedparser/",)),
    ("SQLite writes (pipeline store)", ("leaf:pipeline/store/", "leaf:Database.execute (sqlite_utils")),
    ("h11 (HTTP parsing/serialising)", ("leaf:h11/",)),
    ("uvicorn", ("leaf:uvicorn/",)),
    ("granian (scheduling, send)", ("leaf:granian/",)),
    ("socket writes", ("leaf:_SelectorSocketTransport.write",)),
    ("asyncio event loop", ("leaf:asyncio/", "leaf:selectors.py")),
    ("datasette", ("leaf:datasette/",)),
    ("httpx / httpcore (fetching)", ("leaf:httpx/", "leaf:httpcore/", "leaf:anyio/")),
    ("qsite code (service/, pipeline/)", ("leaf:service/", "leaf:pipeline/")),
]


def _layer(stack: str, leaf: str) -> str:
    for name, rules in LAYERS:
        for rule in rules:
            if rule.startswith("leaf:") and rule[5:] in leaf or not rule.startswith("leaf:") and rule in stack:
                return name
    return "other"


def summarise_profile(raw: Path, top: int = 15) -> dict:
    """Self and inclusive sample shares per function, and shares per layer, from py-spy's collapsed stacks."""
    own, inclusive, layers, total = Counter(), Counter(), Counter(), 0
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        count = int(count)
        total += count
        layers[_layer(stack, stack.rsplit(";", 1)[-1])] += count
        frames = [_frame(f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        if frames:
            own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    share = lambda counter: [(name, round(100 * n / total, 1)) for name, n in counter.most_common(top)]  # noqa: E731
    ours = Counter({k: v for k, v in inclusive.items() if any(p in k for p in ("pipeline/", "service/", "bench/"))})
    return {
        "samples": total,
        "layers_pct": share(layers),
        "self_pct": share(own),
        "inclusive_pct": share(inclusive),
        "project_inclusive_pct": share(ours),
    }


def _frame(frame: str) -> str:
    """``func (path/to/file.py:123)`` -> ``func (file-relative path)``, lines dropped so a function is one row."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "python3.11/", str(ROOT) + "/"):
        if marker in where:
            where = where.split(marker, 1)[1]
            break
    return f"{name} ({where})" if where else name


def profile_serving(args, server_pid: int, targets: list[dict], out: Path,
                    names: tuple[str, ...] = ("news", "news 304", "datasette news")) -> dict:
    """py-spy on the serving process while wrk drives each of ``targets`` named in ``names``.

    A target with a ``walk`` (``(file, first line)``) walks its list of distinct
    requests (:func:`bench.servers.run_wrk`); the profile's ``walked_to`` says where it stopped.
    """
    profiles = {}
    for target in targets:
        if target["name"] not in names:
            continue
        raw = out / f"profile-serve-{target['name'].replace(' ', '-')}.txt"
        spy = subprocess.Popen(
            py_spy_record(raw, ["--pid", str(server_pid), "--subprocesses", "--duration", str(int(args.duration) + 1), "--nonblocking"]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(0.5)
        load = run_wrk(args, target["url"], args.duration, target.get("headers"), walk=target.get("walk"))
        _, err = spy.communicate(timeout=60)
        if spy.returncode != 0 or not raw.exists():
            raise SystemExit(f"bench: py-spy failed: {err.decode()[-2000:]}")
        profiles[target["name"]] = {"raw": shown(raw), "walked_to": load.get("walked_to"), **summarise_profile(raw)}
    return profiles
