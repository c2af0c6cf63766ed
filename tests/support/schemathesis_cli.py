"""schemathesis's own runner (``st run``) against a real server, as CI would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
#: What the checks expect beyond their defaults (read there why).
CONFIG = Path(__file__).with_name("schemathesis.toml")


def run_phases(document_url: str, phases: str, max_examples: int, report: Path) -> str:
    """Run ``phases`` with every check (positive_data_acceptance included); its output once it found no failure.

    The hooks (:mod:`tests.support.schemathesis_hooks`) let it check the snapshot file against its schema.
    """
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "st"), "--config-file", str(CONFIG), "run", document_url,
            "--phases", phases, "--checks", "all", "--max-examples", str(max_examples),
            "--seed", "25", "--no-color", "--report", "ndjson", "--report-ndjson-path", str(report),
        ],
        capture_output=True, text=True, timeout=600, cwd=report.parent,  # its cache (.schemathesis/) goes there
        env={**os.environ, "SCHEMATHESIS_HOOKS": "tests.support.schemathesis_hooks", "PYTHONPATH": str(ROOT)},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    summary = output.split("SUMMARY")[-1]
    for phase in phases.split(","):
        assert f"\u2705 {phase.title()}" in summary, output[-3000:]
    assert "cannot validate" not in output, output[-3000:]  # the snapshot file is checked too (the hooks)
    assert "failed" not in summary.lower(), output[-3000:]
    return output
