"""`eops dev-cluster` commands that need no running cluster: what they say when there is none."""

from __future__ import annotations

from pathlib import Path

from cli.runner import Eops


def test_kubeconfig_of_a_stopped_cluster_exits_1_and_prints_no_path(tmp_path: Path) -> None:
    # What `eops dev-cluster down` leaves: the kubeconfig, and no recorded processes. A real
    # process (the family's one, runner.py): what $(eops dev-cluster kubeconfig) would capture.
    (tmp_path / "kubeconfig").write_text("apiVersion: v1\\nkind: Config\\n")
    result = Eops(None)("dev-cluster", "kubeconfig", "--state-dir", str(tmp_path))
    assert result.code == 1, result.output
    assert result.stdout == "", "nothing for $(eops dev-cluster kubeconfig) to export"
    assert "no dev cluster is running" in result.stderr
    assert "left from a cluster that was stopped" in result.stderr


def test_kubeconfig_of_an_empty_state_dir_exits_1(tmp_path: Path) -> None:
    result = Eops(None, in_process=True)("dev-cluster", "kubeconfig", "--state-dir", str(tmp_path))
    assert result.code == 1, result.output
    assert result.stdout == ""
    assert "eops dev-cluster up" in result.stderr


def test_up_offers_gke_balanced_scale_ups() -> None:
    result = Eops(None, in_process=True)("dev-cluster", "up", "--help")
    assert result.code == 0, result.output
    assert "--balance-zones" in result.stdout
    assert "BALANCED" in result.stdout
