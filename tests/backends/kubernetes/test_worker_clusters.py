"""`--kube-workers NAME=KUBECONFIG,...` (worker_clusters.py): MultiKueue's workers named as their
MultiKueueClusters are, each with a kubeconfig; what is wrong is named with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from elasticityops.backends.kubernetes.worker_clusters import FLAG, parse_workers, unreadable


def test_workers_are_read_in_order_with_spaces_around_the_parts() -> None:
    workers, problems = parse_workers(" worker-1=/a/w1.yaml , us-east4.gpu = /a/w2.yaml")
    assert problems == []
    assert workers == {"worker-1": "/a/w1.yaml", "us-east4.gpu": "/a/w2.yaml"}
    assert parse_workers(None) == ({}, [])
    assert parse_workers("  ") == ({}, [])


@pytest.mark.parametrize(
    ("text", "said", "fix"),
    [
        ("worker-1", "is not NAME=KUBECONFIG", "worker-1=/etc/eops/worker-1.kubeconfig"),
        ("=/a/w1.yaml", "is not NAME=KUBECONFIG", "NAME"[:0]),
        ("worker-1=", "is not NAME=KUBECONFIG", ""),
        ("Worker_1=/a/w1.yaml", "is not a MultiKueueCluster name", "lower-case letters"),
        ("w\x1b[2J=/a", "is not a MultiKueueCluster name", "lower-case letters"),
        ("w1=/a,w1=/b", "w1 is named twice", "name each worker once"),
    ],
)
def test_what_is_wrong_is_named_with_the_fix(text: str, said: str, fix: str) -> None:
    _, problems = parse_workers(text)
    [problem] = problems
    assert problem.field == FLAG
    assert said in problem.problem
    assert fix in problem.fix


def test_a_kubeconfig_that_cannot_be_read_is_named_with_its_worker(tmp_path: Path) -> None:
    there = tmp_path / "w1.kubeconfig"
    there.write_text("apiVersion: v1\n")
    assert unreadable({"worker-1": str(there)}) == []
    [problem] = unreadable({"worker-1": str(there), "worker-2": str(tmp_path / "missing")})
    assert "worker-2" in problem.problem
    assert "cannot be read" in problem.problem
