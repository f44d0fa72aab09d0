"""`eops doctor ... --json` as a real process against a cluster: its exit status and findings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def run_doctor(
    kubeconfig: Path, namespace: str, *flags: str, timeout: float = 300
) -> tuple[int, list[dict[str, str]]]:
    argv = [sys.executable, "-m", "elasticityops.cli.main", "doctor", "--kubeconfig", str(kubeconfig)]
    done = subprocess.run(
        [*argv, "--namespace", namespace, *flags, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.stdout, done.stderr
    findings: list[dict[str, str]] = json.loads(done.stdout)["findings"]
    return done.returncode, findings
