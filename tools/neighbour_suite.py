"""Datasette's own test suite, run without and with qsite's plugins loaded: does qsite change anything outside /api/v1?

``make test-neighbour`` runs this. What it does:

1. downloads Datasette's sdist from PyPI (``pip download``; its SHA-256 is
   checked against :data:`SDIST_SHA256`) and unpacks its ``tests/``. The sdist
   ships the test modules but not their support files (``conftest.py``,
   ``fixtures.py``, ``utils.py``, ``plugins/``, ``pytest.ini``): those are kept
   in ``tools/datasette-suite/tests/`` (Apache-2.0, from simonw/datasette's
   0.65.x branch, see its README) and laid over it;
2. builds qsite's wheel and installs it into a fresh venv beside that
   Datasette and its ``test`` extra (the other packages at uv.lock's
   versions: ``tests/support/wheel.py``);
3. runs the suite twice in that one venv: as Datasette runs it (installed
   plugins are not loaded while its tests run), and with qsite's entry points
   loaded (``-p load_qsite``, ``tools/datasette-suite/load_qsite.py``), so the
   only difference is qsite;
4. compares the failures (junit XML): a test that passes without qsite and
   fails with it is qsite's doing, unless it is one of :data:`EXCEPTED` (tests
   that list the installed plugins or their menu items, which qsite adds to by
   being there). Prints the counts and those tests grouped by file and message;
   exits 1 when there is any.

Usage: ``python tools/neighbour_suite.py [--work DIR] [--workers N] [-k EXPR]``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.wheel import build_wheel, venv_with  # noqa: E402

DATASETTE = "0.65.5"
#: The sdist PyPI serves for that release (``pip download`` checks nothing by itself).
SDIST_SHA256 = "8d16ab1bf9a2753089cd3cb079045885d440f11267973e89e08e7fecf555264a"
SUPPORT = ROOT / "tools" / "datasette-suite"
#: Datasette's ``test`` extra of that release, with the pytest plugins held where its tests still run
#: (pytest-asyncio 1.0 removed what they use).
TEST_REQUIREMENTS = (
    f"datasette[test]=={DATASETTE}", "pytest>=8,<9", "pytest-asyncio>=0.23,<0.25", "pytest-xdist>=3.6",
)
#: Tests that list the installed plugins (or what they add to the menus): qsite is one, so these
#: change by its being loaded at all, as with any plugin.
EXCEPTED = {
    "tests/test_api.py::test_plugins_json",
    "tests/test_cli.py::test_plugins_cli",
    "tests/test_config_dir.py::test_plugins",
    "tests/test_plugins.py::test_hook_menu_links",
    "tests/test_html.py::test_navigation_menu_links",
}


def download_suite(work: Path) -> Path:
    """Datasette's sdist, checked and unpacked, its test support laid over it; returns the source folder."""
    sdist = work / f"datasette-{DATASETTE}.tar.gz"
    if not sdist.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
             "--dest", str(work), f"datasette=={DATASETTE}"],
            check=True,
        )
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise SystemExit(f"{sdist}: SHA-256 {digest}, expected {SDIST_SHA256}")
    source = work / f"datasette-{DATASETTE}"
    shutil.rmtree(source, ignore_errors=True)
    with tarfile.open(sdist) as archive:
        archive.extractall(work, filter="data")
    # Only the tests run from here: Datasette itself is the installed one (the venv's).
    shutil.rmtree(source / "datasette")
    for path in (SUPPORT / "tests").rglob("*"):
        if path.is_file():
            target = source / "tests" / path.relative_to(SUPPORT / "tests")
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                shutil.copy(path, target)
    shutil.copy(SUPPORT / "pytest.ini", source / "pytest.ini")
    (source / "docs").mkdir(exist_ok=True)
    shutil.copy(SUPPORT / "docs" / "authentication.rst", source / "docs")  # conftest checks permissions against it
    return source


def run_suite(bin_dir: Path, source: Path, junit: Path, workers: int, load_qsite: bool, keyword: str | None) -> None:
    """Datasette's suite as its CI runs it: the serial tests apart, after the rest in parallel."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("QSITE_", "PYTHONPATH"))}
    env["PYTHONPATH"] = str(SUPPORT)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"  # the tests that start `datasette` run the venv's
    # --timeout (pytest-timeout, in Datasette's test extra): a test that hangs fails instead of stopping the run.
    common = [str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--timeout=300"]
    if load_qsite:
        common += ["-p", "load_qsite"]
    if keyword:
        common += ["-k", keyword]
    for part, extra in (("parallel", ["-n", str(workers), "-m", "not serial"]), ("serial", ["-m", "serial"])):
        print(f"-- {'with' if load_qsite else 'without'} qsite, {part}", flush=True)
        subprocess.run(
            [*common, *extra, f"--junitxml={junit.with_suffix(f'.{part}.xml')}", "tests"],
            cwd=source, env=env, stdout=subprocess.DEVNULL,
        )


def outcomes(junit: Path) -> dict[str, tuple[str, str]]:
    """``{test id: (outcome, first line of the message)}`` from the junit files of one run."""
    found = {}
    for path in sorted(junit.parent.glob(junit.name.replace(".xml", "") + ".*.xml")):
        for case in ET.parse(path).getroot().iter("testcase"):
            module = case.get("classname", "").replace(".", "/")
            test_id = f"{module}.py::{case.get('name')}"
            outcome, message = "passed", ""
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome, message = "failed", (child.get("message") or "").splitlines()[0:1]
                    message = message[0] if message else ""
                elif child.tag == "skipped":
                    outcome = "skipped"
            found[test_id] = (outcome, message)
    return found


def compare(without: dict, with_qsite: dict) -> tuple[list[str], list[str]]:
    """The tests failing only with qsite: (qsite's doing, excepted)."""
    newly = sorted(
        test for test, (outcome, _) in with_qsite.items()
        if outcome == "failed" and without.get(test, ("missing", ""))[0] == "passed"
    )
    return [test for test in newly if _base(test) not in EXCEPTED], [test for test in newly if _base(test) in EXCEPTED]


def _base(test: str) -> str:
    return re.sub(r"\[.*\]$", "", test)


def report(without: dict, with_qsite: dict) -> int:
    failing, excepted = compare(without, with_qsite)
    count = lambda results, kind: sum(outcome == kind for outcome, _ in results.values())  # noqa: E731
    print(f"Datasette {DATASETTE}'s suite: {len(without)} tests")
    print(f"  without qsite: {count(without, 'failed')} failed, {count(without, 'passed')} passed, {count(without, 'skipped')} skipped")
    print(f"  with qsite:    {count(with_qsite, 'failed')} failed, {count(with_qsite, 'passed')} passed, {count(with_qsite, 'skipped')} skipped")
    print(f"  failing only with qsite: {len(failing)} (and {len(excepted)} excepted: they list the installed plugins)")
    by_file = Counter(test.split("::")[0] for test in failing)
    for file, number in by_file.most_common():
        print(f"    {number:4d}  {file}")
    by_message = defaultdict(list)
    for test in failing:
        by_message[re.sub(r"\d+", "N", with_qsite[test][1])[:110]].append(test)
    print("  by message:")
    for message, tests in sorted(by_message.items(), key=lambda item: -len(item[1])):
        print(f"    {len(tests):4d}  {message or '(no message)'}  e.g. {tests[0]}")
    return 1 if failing else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "neighbour", help="working folder (default: build/neighbour)")
    parser.add_argument("--workers", type=int, default=max(1, os.cpu_count() or 1), help="pytest-xdist workers for the parallel part")
    parser.add_argument("-k", dest="keyword", help="only the tests pytest -k selects (a quick look)")
    parser.add_argument("--compare-only", action="store_true", help="compare the junit files of an earlier run")
    parser.add_argument("--only", choices=("without", "with"), help="run one of the two (the other's junit files are kept)")
    args = parser.parse_args(argv)
    work = args.work.resolve()
    runs = {False: work / "without.xml", True: work / "with.xml"}
    if not args.compare_only:
        work.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(work / "venv", ignore_errors=True)
        for old in work.glob("*.wheel"):
            shutil.rmtree(old)
        wheel = build_wheel(work / "dist.wheel")
        bin_dir = venv_with(work / "venv", wheel, *TEST_REQUIREMENTS)
        for load_qsite, junit in runs.items():
            if args.only and args.only != junit.stem:
                continue
            for old in work.glob(junit.stem + ".*.xml"):
                old.unlink()
            # Each run on a fresh copy: Datasette's tests leave files behind (an empty tests/spatialite.db,
            # which turns a test expecting `datasette serve` to refuse a missing file into a server that never stops).
            source = download_suite(work)
            run_suite(bin_dir, source, junit, args.workers, load_qsite, args.keyword)
    return report(outcomes(runs[False]), outcomes(runs[True]))


if __name__ == "__main__":
    sys.exit(main())
