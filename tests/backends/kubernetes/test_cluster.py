"""The Kubernetes backend against the real control plane (dev cluster, simulated GKE T4 nodes),
through the real gateway over HTTP: `eops serve --backend kubernetes` as a subprocess."""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from elasticityops.backends.kubernetes.deploy import DeployOptions, SecretKey, build_deploy
from elasticityops.backends.kubernetes.manifests import build_job, build_payload_secret
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.cli.render_app import dump_yaml
from elasticityops.devcluster.stages import SIMULATED_OUTPUT
from elasticityops.domain.budget import GpuBudget

from .builders import invocation, spec
from .cluster_support import (
    TERMINAL,
    deploy,
    ensure_priority_classes,
    invoke,
    jobs_of,
    k8s_gateway,
    pods_of,
    runs,
    start_k8s_gateway,
    status,
    wait_state,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(dev_cluster: Any) -> Any:
    ensure_priority_classes(dev_cluster)
    return dev_cluster


def _apply_dry_run(cluster: Any, objects: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    text = dump_yaml(objects)
    path = Path(cluster.state_dir) / f"dry-run-{time.monotonic_ns()}.yaml"
    path.write_text(text)
    done: subprocess.CompletedProcess[str] = cluster.kubectl(
        "apply", "--server-side", "--dry-run=server", "-f", str(path), check=False
    )
    return done


def test_rendered_deploy_is_accepted_by_the_api_server(cluster: Any, dev_namespace: str) -> None:
    kubernetes = KubernetesSettings(namespace=dev_namespace, gpu_driver_version="latest")
    objects = build_deploy(DeployOptions(kubernetes=kubernetes, gpu_budget=GpuBudget(total=8)))
    done = _apply_dry_run(cluster, objects)
    assert done.returncode == 0, done.stderr
    kinds = {line.split("/")[0] for line in done.stdout.splitlines()}
    assert {
        "namespace",
        "serviceaccount",
        "role.rbac.authorization.k8s.io",
        "rolebinding.rbac.authorization.k8s.io",
        "clusterrole.rbac.authorization.k8s.io",
        "clusterrolebinding.rbac.authorization.k8s.io",
        "priorityclass.scheduling.k8s.io",
        "persistentvolumeclaim",
        "deployment.apps",
        "service",
    } <= kinds


def test_rendered_replicas_are_accepted_and_may_only_renew_their_lease(
    cluster: Any, dev_namespace: str
) -> None:
    kubernetes = KubernetesSettings(namespace=dev_namespace)
    options = DeployOptions(kubernetes=kubernetes, replicas=3, database_url_secret=SecretKey("eops-db"))
    objects = build_deploy(options)
    done = _apply_dry_run(cluster, objects)
    assert done.returncode == 0, done.stderr
    kinds = {line.split("/")[0] for line in done.stdout.splitlines()}
    assert {"deployment.apps", "poddisruptionbudget.policy", "role.rbac.authorization.k8s.io"} <= kinds
    assert "persistentvolumeclaim" not in kinds
    # The gateway's own namespaced RBAC for real (the namespace goes with the test), then the API
    # server's answer for its ServiceAccount.
    namespaced = [o for o in objects if o["kind"] in ("ServiceAccount", "Role", "RoleBinding")]
    path = Path(cluster.state_dir) / f"rbac-{dev_namespace}.yaml"
    path.write_text(dump_yaml(namespaced))
    cluster.kubectl("apply", "--server-side", "-f", str(path))
    account = f"system:serviceaccount:{dev_namespace}:elasticityops"

    def can(verb: str, resource: str) -> str:
        asked: subprocess.CompletedProcess[str] = cluster.kubectl(
            "auth", "can-i", verb, resource, "-n", dev_namespace, f"--as={account}", check=False
        )
        return (asked.stdout.split() or [asked.stderr])[0]  # "no" may be followed by " - reason"

    assert can("get", "leases.coordination.k8s.io/elasticityops") == "yes"
    assert can("update", "leases.coordination.k8s.io/elasticityops") == "yes"
    assert can("create", "leases.coordination.k8s.io") == "yes"
    assert can("delete", "leases.coordination.k8s.io/elasticityops") == "no"
    assert can("patch", "leases.coordination.k8s.io/elasticityops") == "no"
    assert can("get", "leases.coordination.k8s.io/another-lease") == "no"
    assert can("list", "leases.coordination.k8s.io") == "no"


def test_rendered_job_and_secret_are_accepted(cluster: Any, dev_namespace: str) -> None:
    settings = KubernetesSettings(namespace=dev_namespace)
    inv = invocation()
    job = build_job(spec(annotations=runs(1)), inv, settings, "http://gw/v1/invocations/x/result")
    secret = build_payload_secret(inv.id, b"{}", "token", "00000000-0000-0000-0000-000000000000", settings)
    done = _apply_dry_run(cluster, [job, secret])
    assert done.returncode == 0, done.stderr


def test_eops_render_output_is_what_kubectl_applies(cluster: Any, dev_namespace: str, tmp_path: Path) -> None:
    from helpers.server import EOPS

    fn = tmp_path / "fn.yaml"
    fn.write_text("name: embed\nimage: worker:1\ncommand: [python, w.py]\npriority: high\n")
    for argv in (
        ["render", "job", str(fn), "--namespace", dev_namespace],
        ["render", "deploy", "--namespace", dev_namespace],
        ["render", "deploy", f"--namespace={dev_namespace}", "--replicas=3", "--database-url-secret=eops-db"],
    ):
        rendered = subprocess.run([EOPS, *argv], capture_output=True, text=True, check=True, timeout=60)
        objects = list(yaml.safe_load_all(rendered.stdout))
        done = _apply_dry_run(cluster, objects)
        assert done.returncode == 0, f"{argv}: {done.stderr}"


def test_failures_are_named(cluster: Any, dev_namespace: str, tmp_path: Path) -> None:
    with k8s_gateway(
        cluster, dev_namespace, tmp_path / "gw", env={"EOPS_KUBE_PROVISIONING_TIMEOUT_SECONDS": "8"}
    ) as gw:
        deploy(gw, name="fails", annotations=runs(1, exit_code=3))
        deploy(gw, name="slow", annotations=runs(600), timeout_seconds=3)
        # The static pool is all T4, and the autoscaler acts on a pending GPU pod only after 30 s
        # (upstream's fixed buffer): no L4 node comes within the 8 s provisioning timeout. (The
        # L4 group's nodes are the lane `nodes`' business: no test of this lane leaves one.)
        deploy(gw, name="l4", gpu={"type": "nvidia-l4"}, timeout_seconds=600)
        failing, slow, starved = invoke(gw, "fails"), invoke(gw, "slow"), invoke(gw, "l4")

        failed = wait_state(gw, failing, {"failed"}, timeout=120)
        assert failed["exit_code"] == 3
        assert failed["failure_reason"] == "exit_code"
        assert "exit code 3" in failed["message"]

        timed_out = wait_state(gw, slow, {"timed_out"}, timeout=120)
        assert timed_out["failure_reason"] == "timeout"
        assert "timeout of 3 s" in timed_out["message"]

        no_node = wait_state(gw, starved, {"failed"}, timeout=120)
        assert no_node["failure_reason"] == "no_capacity"
        # The failure quotes the scheduler's last word (backends/kubernetes/observe.py,
        # no_capacity): no node, all of them T4, matches the L4 selector. The scheduler does not
        # name the label's value; ops/doctor/check_scheduling.py reads the same phrase.
        assert no_node["message"].startswith(
            "no GPU node within the provisioning timeout of 8 s; "
            "last word from the cluster: Unschedulable: 0/"
        ), no_node["message"]
        assert "didn't match pod's node affinity/selector" in no_node["message"].lower(), no_node["message"]
        # Its Job is deleted, so the pod stops asking for a node.
        deadline = time.monotonic() + 60
        while jobs_of(cluster, dev_namespace, starved) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert jobs_of(cluster, dev_namespace, starved) == []


def test_cancel_deletes_the_job_and_its_pod(cluster: Any, dev_namespace: str, tmp_path: Path) -> None:
    with k8s_gateway(cluster, dev_namespace, tmp_path / "gw") as gw:
        deploy(gw, name="long", annotations=runs(600))
        inv = invoke(gw, "long")
        wait_state(gw, inv, {"running"}, timeout=120)
        answer = httpx.post(f"{gw.url}/v1/invocations/{inv}/cancel", headers=gw.auth, timeout=30)
        assert answer.status_code == 200, answer.text
        assert status(gw, inv)["state"] == "cancelled"
        deadline = time.monotonic() + 60
        pods: list[Any] = ["?"]
        while time.monotonic() < deadline:
            with cluster.api() as api:
                pods, _ = api.list(
                    f"/api/v1/namespaces/{dev_namespace}/pods",
                    {"labelSelector": f"elasticityops.dev/invocation={inv}"},
                )
            if not pods and not jobs_of(cluster, dev_namespace, inv):
                break
            time.sleep(0.5)
        assert pods == []
        assert jobs_of(cluster, dev_namespace, inv) == []


def test_logs_come_through_the_pod_log_api_and_a_follow_ends_with_the_invocation(
    cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    """kwok stands in for each node's kubelet: the API server's pod log API reaches it, and it
    serves every container the dev cluster's one log (stages.cluster_logs). The gateway answers
    with those lines, read and followed. kwok's stream never ends (it tails the file for ever, its
    container never "stops"), so the follow, started while the invocation runs, ends because the
    invocation has: the gateway's own end of a follow, not the stream's."""
    expected = "".join(f"{line}\n" for line in SIMULATED_OUTPUT)
    with k8s_gateway(cluster, dev_namespace, tmp_path / "gw") as gw:
        deploy(gw, name="talks", annotations=runs(6))
        inv = invoke(gw, "talks")
        wait_state(gw, inv, {"running"}, timeout=120)
        logs = f"{gw.url}/v1/invocations/{inv}/logs"
        followed = httpx.get(logs, params={"follow": "true"}, headers=gw.auth, timeout=90)
        assert (followed.status_code, followed.text) == (200, expected)
        assert status(gw, inv)["state"] == "succeeded"  # it ended with the invocation
        for follow in ("false", "true"):
            answer = httpx.get(logs, params={"follow": follow}, headers=gw.auth, timeout=30)
            assert (answer.status_code, answer.text) == (200, expected)


@pytest.mark.parametrize(
    ("workload", "running_within"),
    [pytest.param("job", 120, id="jobs"), pytest.param("pod", 180, id="bare-pods")],
)
def test_gateway_killed_mid_flight_finishes_everything_once(
    cluster: Any, dev_namespace: str, tmp_path: Path, workload: str, running_within: float
) -> None:
    """With either workload (EOPS_KUBE_WORKLOAD): one Job, or one bare pod and no Job, each."""
    data = tmp_path / "gw"
    env = {"EOPS_KUBE_WORKLOAD": workload}
    gw = start_k8s_gateway(cluster, dev_namespace, data, env=env)
    try:
        deploy(gw, name="work", annotations=runs(10))
        ids = [invoke(gw, "work", {"i": i}) for i in range(6)]
        # Killed once one runs, whichever: on a loaded machine the six requests took longer than
        # the first one's run (a CI rehearsal at load 12 found it done before it looked).
        _until_one_runs(gw, ids, running_within)
        port = int(gw.url.rsplit(":", 1)[1])
        gw.kill()
        gw = start_k8s_gateway(cluster, dev_namespace, data, port=port, env=env)
        finals = [wait_state(gw, inv, {"succeeded"}, timeout=180) for inv in ids]
        assert all(f["exit_code"] == 0 for f in finals)
        made = jobs_of(cluster, dev_namespace) if workload == "job" else pods_of(cluster, dev_namespace)
        names = [m["metadata"]["name"] for m in made]
        assert sorted(names) == sorted(f"eops-{inv}" for inv in ids)  # one each, no duplicate
        if workload == "pod":
            assert jobs_of(cluster, dev_namespace) == []
    finally:
        gw.stop()


def _until_one_runs(gw: Any, ids: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        states = {inv: status(gw, inv)["state"] for inv in ids}
        if "running" in states.values():
            return
        assert not set(states.values()) <= TERMINAL, f"all ended before one was seen running: {states}"
        assert time.monotonic() < deadline, f"none running after {timeout:g} s: {states}"
        time.sleep(0.2)


def test_a_burst_becomes_one_job_each_and_every_invocation_ends(
    cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    """The suite's small version of bench/k8s_burst.py: 40 invocations sent at once go through
    batched admission, parallel launches and the watches to the end, each with one Job."""
    count = 40
    with k8s_gateway(cluster, dev_namespace, tmp_path / "gw") as gw:
        deploy(gw, name="burst", annotations=runs(1), max_concurrency=count)
        with ThreadPoolExecutor(max_workers=16) as pool:
            ids = list(pool.map(lambda i: invoke(gw, "burst", {"i": i}), range(count)))
        finals = [wait_state(gw, inv, {"succeeded"}, timeout=240) for inv in ids]
        jobs = jobs_of(cluster, dev_namespace)
    assert len(set(ids)) == count
    assert sorted(j["metadata"]["name"] for j in jobs) == sorted(f"eops-{inv}" for inv in ids)
    for final in finals:
        t = {k: datetime.fromisoformat(v) for k, v in final["timeline"].items() if isinstance(v, str)}
        assert t["accepted"] <= t["dispatched"] <= t["capacity_ready"] <= t["started"] <= t["finished"], t
        assert final["node"], "the node it ran on is recorded"


def test_a_per_type_gpu_budget_creates_jobs_up_to_it_and_queues_the_rest(
    cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    """Admitted work gets its Job at once (the autoscaler sees its pod); work past the budget gets
    none until a GPU frees, and waits with its queue position."""
    budget = {"EOPS_GPU_BUDGET": "nvidia-tesla-t4=2"}
    with k8s_gateway(cluster, dev_namespace, tmp_path / "gw", env=budget) as gw:
        deploy(gw, name="work", annotations=runs(20), max_concurrency=10)
        ids = [invoke(gw, "work", {"i": i}) for i in range(4)]
        for inv in ids[:2]:
            wait_state(gw, inv, {"pending", "running"}, timeout=60)
        waiting = [status(gw, inv) for inv in ids[2:]]
        assert [w["state"] for w in waiting] == ["queued", "queued"]
        assert [w["queue_position"] for w in waiting] == [1, 2]
        assert waiting[0]["queue_reason"] == "the GPU budget for nvidia-tesla-t4 is full (2 of 2 in use)"
        assert sorted(j["metadata"]["name"] for j in jobs_of(cluster, dev_namespace)) == sorted(
            f"eops-{inv}" for inv in ids[:2]
        )
        finals = [wait_state(gw, inv, {"succeeded"}, timeout=300) for inv in ids]
    assert all(f["exit_code"] == 0 for f in finals)


def test_high_priority_preempts_the_newest_low_job_within_a_per_type_budget(
    cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    """The PriorityClasses share one value, so the scheduler never preempts one of our pods for
    another: the gateway does. With the T4 budget full of low-priority preemptible work, a
    high-priority request makes the newest low one's Job go, starts, and the victim comes back
    as attempt 1 with a Job of its own (eops-<id>-a1), and succeeds."""
    budget = {"EOPS_GPU_BUDGET": "nvidia-tesla-t4=2"}
    with k8s_gateway(cluster, dev_namespace, tmp_path / "gw", env=budget) as gw:
        deploy(gw, name="batch", priority="low", preemptible=True, retries=1, annotations=runs(40))
        deploy(gw, name="urgent", priority="high", annotations=runs(5))
        older = invoke(gw, "batch")
        wait_state(gw, older, {"running"}, timeout=180)
        newer = invoke(gw, "batch")
        wait_state(gw, newer, {"running"}, timeout=180)
        high = invoke(gw, "urgent")
        requeued = wait_state(gw, newer, {"queued"}, timeout=60)
        assert requeued["attempt"] == 1
        assert any(high in n["message"] for n in requeued["notes"] if n["kind"] == "Preempted")
        # The old attempt's Job goes; the high one runs within the budget.
        deadline = time.monotonic() + 60
        while any(j["metadata"]["name"] == f"eops-{newer}" for j in jobs_of(cluster, dev_namespace, newer)):
            assert time.monotonic() < deadline, "the preempted attempt's Job was not deleted"
            time.sleep(0.5)
        wait_state(gw, high, {"pending", "running", "succeeded"}, timeout=60)
        assert status(gw, older)["attempt"] == 0
        assert status(gw, older)["state"] in {"running", "succeeded"}
        done = wait_state(gw, high, {"succeeded"}, timeout=180)
        assert done["exit_code"] == 0
        again = wait_state(gw, newer, {"succeeded"}, timeout=300)
        assert again["attempt"] == 1
        names = [j["metadata"]["name"] for j in jobs_of(cluster, dev_namespace, newer)]
        assert names == [f"eops-{newer}-a1"], names
        [job] = jobs_of(cluster, dev_namespace, newer)
        assert job["metadata"]["labels"]["elasticityops.dev/attempt"] == "1"
        assert wait_state(gw, older, {"succeeded"}, timeout=300)["attempt"] == 0


def test_without_retries_a_preempted_low_job_fails_preempted(
    cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    budget = {"EOPS_GPU_BUDGET": "nvidia-tesla-t4=1"}
    with k8s_gateway(cluster, dev_namespace, tmp_path / "gw", env=budget) as gw:
        deploy(gw, name="batch", priority="low", preemptible=True, annotations=runs(120))
        deploy(gw, name="urgent", priority="high", annotations=runs(2))
        victim = invoke(gw, "batch")
        wait_state(gw, victim, {"running"}, timeout=180)
        high = invoke(gw, "urgent")
        failed = wait_state(gw, victim, {"failed"}, timeout=60)
        assert failed["failure_reason"] == "preempted"
        assert high in failed["message"]
        assert wait_state(gw, high, {"succeeded"}, timeout=180)["exit_code"] == 0
