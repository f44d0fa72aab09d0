"""The local backend's pure parts: slot bookkeeping, slot planning, job env, exit outcomes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from elasticityops.backends.local.gpus import SlotDevice, parse_nvidia_smi_list, plan_slots
from elasticityops.backends.local.jobenv import job_env, resolve_argv, slot_node
from elasticityops.backends.local.outcome import outcome_of
from elasticityops.backends.local.slots import SlotPool
from elasticityops.domain.invocations import FailureReason, State

VIRTUAL = [SlotDevice(i, None, "virtual") for i in range(3)]
AT = datetime(2026, 1, 1, tzinfo=UTC)


def test_nvidia_smi_list_is_parsed() -> None:
    text = (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)\n"
        "GPU 1: NVIDIA L4 (UUID: GPU-5678)\n"
        "No devices were found\n"
    )
    assert parse_nvidia_smi_list(text) == [(0, "NVIDIA H100 80GB HBM3"), (1, "NVIDIA L4")]


@pytest.mark.parametrize(
    ("gpus", "virtual", "detected", "physical"),
    [
        pytest.param(None, False, [], [None, None], id="no-gpu-default-virtual"),
        pytest.param(3, False, [], [None, None, None], id="no-gpu-n-virtual"),
        pytest.param(None, False, [(0, "L4"), (1, "L4")], [0, 1], id="all-physical"),
        pytest.param(1, False, [(0, "L4"), (1, "L4")], [0], id="first-n-physical"),
        pytest.param(2, True, [(0, "L4")], [None, None], id="told-virtual"),
        pytest.param(4, False, [(0, "L4")], [None] * 4, id="more-than-physical-is-virtual"),
    ],
)
def test_plan_slots(
    gpus: int | None, virtual: bool, detected: list[tuple[int, str]], physical: list[int | None]
) -> None:
    slots = plan_slots(gpus, virtual, detected)
    assert [s.physical for s in slots] == physical
    assert [s.index for s in slots] == list(range(len(physical)))


def test_plan_slots_reads_zero_as_auto_and_refuses_negative() -> None:
    assert [s.physical for s in plan_slots(0, False, [(0, "L4")])] == [0]
    with pytest.raises(ValueError, match="0 \\(auto\\) or more"):
        plan_slots(-1, False, [])


def test_zero_idle_timeout_means_never_released() -> None:
    pool = SlotPool(VIRTUAL[:1], idle_timeout_s=0)
    assert pool.take("a", 1, now=0) is not None
    pool.release("a", now=0)
    assert pool.view(now=1e9)[0].warm


def test_slots_are_never_shared_and_free_counts_down() -> None:
    pool = SlotPool(VIRTUAL, idle_timeout_s=None)
    first = pool.take("a", 2, now=0)
    assert first is not None
    assert pool.free() == 1
    assert pool.take("b", 2, now=0) is None  # not enough: nothing taken
    assert pool.free() == 1
    second = pool.take("c", 1, now=0)
    assert second is not None
    assert {d.index for d in first[0]}.isdisjoint(d.index for d in second[0])
    assert pool.free() == 0
    assert pool.release("a", now=1) == 2
    assert pool.free() == 2


def test_cold_then_warm_then_cold_after_idle_timeout() -> None:
    pool = SlotPool(VIRTUAL[:1], idle_timeout_s=10, provision_delay_s=3)
    taken = pool.take("a", 1, now=0)
    assert taken is not None
    assert taken[1] == 3  # cold: the whole provisioning delay
    pool.release("a", now=5)
    warm = pool.take("b", 1, now=14)
    assert warm is not None
    assert warm[1] == 0
    pool.release("b", now=20)
    assert pool.view(now=29)[0].warm
    assert not pool.view(now=30)[0].warm
    cold = pool.take("c", 1, now=30)
    assert cold is not None
    assert cold[1] == 3


def test_keep_warm_provisions_cold_slots_and_pins_them_past_the_idle_timeout() -> None:
    pool = SlotPool(VIRTUAL, idle_timeout_s=10, provision_delay_s=4)
    pool.keep_warm(2, now=0)
    assert pool.warm_picture(now=1) == (0, 2, 0, ())  # both provisioning
    taken = pool.take("early", 1, now=1)
    assert taken is not None
    assert taken[1] == 3  # on its way: only the rest of the delay
    pool.keep_warm(2, now=1)  # the taken one is replaced: the third slot starts
    assert pool.warm_picture(now=2) == (0, 2, 0, ())
    assert pool.warm_picture(now=5) == (2, 0, 2, ())
    assert pool.warm_picture(now=1000) == (2, 0, 2, ())  # pinned: never goes cold
    late = pool.take("late", 1, now=1000)
    assert late is not None
    assert late[1] == 0  # warm
    pool.keep_warm(0, now=1000)  # unpinned: idle from now, cold after the timeout
    assert pool.warm_picture(now=1005) == (1, 0, 0, (5.0,))
    assert pool.warm_picture(now=1010) == (0, 0, 0, ())


def test_keep_warm_dropped_before_provisioning_is_done_leaves_the_slot_cold() -> None:
    pool = SlotPool(VIRTUAL[:1], idle_timeout_s=None, provision_delay_s=4)
    pool.keep_warm(1, now=0)
    pool.keep_warm(0, now=1)
    assert pool.warm_picture(now=10) == (0, 0, 0, ())
    taken = pool.take("a", 1, now=10)
    assert taken is not None
    assert taken[1] == 4


def test_warm_slots_are_handed_out_first() -> None:
    pool = SlotPool(VIRTUAL, idle_timeout_s=None)
    assert pool.take("a", 1, now=0) is not None  # slot 0
    assert pool.take("b", 1, now=0) is not None  # slot 1
    pool.release("b", now=1)
    taken = pool.take("c", 1, now=2)
    assert taken is not None
    assert [d.index for d in taken[0]] == [1]
    assert taken[1] == 0


def test_claim_keeps_an_adopted_slot_taken_and_refuses_conflicts() -> None:
    pool = SlotPool(VIRTUAL, idle_timeout_s=None)
    assert pool.claim("a", [2]) is not None
    assert pool.free() == 2
    assert pool.claim("b", [2]) is None  # held by a
    assert pool.claim("c", [7]) is None  # no such slot here
    taken = pool.take("d", 2, now=0)
    assert taken is not None
    assert 2 not in [d.index for d in taken[0]]


def test_leading_python_becomes_the_gateway_interpreter() -> None:
    assert resolve_argv(["python", "x.py"], "/venv/bin/python") == ["/venv/bin/python", "x.py"]
    assert resolve_argv(["python3", "-c", "1"], "/venv/bin/python")[0] == "/venv/bin/python"
    assert resolve_argv(["/usr/bin/python", "x"], "/venv/bin/python")[0] == "/usr/bin/python"
    assert resolve_argv(["echo", "python"], "/venv/bin/python") == ["echo", "python"]


def test_job_env_layers_and_hides_the_gateways_own_settings() -> None:
    env = job_env(
        {"PATH": "/bin", "EOPS_TOKEN": "secret", "CUDA_VISIBLE_DEVICES": "0,1", "MODEL": "base"},
        {"MODEL": "clip"},
        invocation_id="inv-1",
        payload_path="/r/payload",
        result_path="/r/result",
        callback_url=None,
        callback_token="t",
        slots=[SlotDevice(2, None, "virtual"), SlotDevice(3, None, "virtual")],
    )
    assert env["PATH"] == "/bin"
    assert env["MODEL"] == "clip"
    assert "EOPS_TOKEN" not in env
    assert "EOPS_CALLBACK_URL" not in env
    assert env["EOPS_GPU_SLOT"] == "2,3"
    assert env["CUDA_VISIBLE_DEVICES"] == ""  # virtual slots: no real GPU by accident


def test_job_env_takes_only_an_allowlist_of_the_gateways_environment() -> None:
    gateway = {
        "PATH": "/bin",
        "HOME": "/home/g",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t",
        "DATABASE_URL": "postgresql://u:pw@db/eops",
        "GITHUB_TOKEN": "ghp_x",
        "LD_PRELOAD": "/evil.so",
        "PYTHONPATH": "/gateway/src",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "CUDA_LAUNCH_BLOCKING": "1",
    }
    env = job_env(
        gateway,
        {"PYTHONPATH": "/fn/src"},
        invocation_id="inv-1",
        payload_path="/r/payload",
        result_path="/r/result",
        callback_url=None,
        callback_token="t",
        slots=[SlotDevice(0, None, "virtual")],
    )
    inherited = {k for k in env if k in gateway}
    assert inherited == {"PATH", "HOME", "LANG", "LC_ALL", "TZ", "PYTHONPATH"}
    assert env["PYTHONPATH"] == "/fn/src"  # the function's own env, not the gateway's
    assert not {k for k in env if k.startswith("EOPS_")} - {
        "EOPS_INVOCATION_ID",
        "EOPS_PAYLOAD_PATH",
        "EOPS_RESULT_PATH",
        "EOPS_CALLBACK_TOKEN",
        "EOPS_GPU_SLOT",
    }


def test_physical_slots_expose_their_gpus() -> None:
    slots = [SlotDevice(0, 3, "L4")]
    env = job_env(
        {},
        {},
        invocation_id="i",
        payload_path="p",
        result_path="r",
        callback_url="http://h/v1/invocations/i/result",
        callback_token="t",
        slots=slots,
    )
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # nvidia-smi's numbering, not fastest-first
    assert env["EOPS_CALLBACK_URL"] == "http://h/v1/invocations/i/result"
    assert slot_node(slots) == "slot-0/gpu3"
    assert slot_node(VIRTUAL[1:]) == "slot-1+2"


@pytest.mark.parametrize(
    ("record", "reason", "exit_code", "timed_out", "cancelled"),
    [
        pytest.param({"exit_code": 0}, None, 0, False, False, id="success"),
        pytest.param({"exit_code": 3}, FailureReason.exit_code, 3, False, False, id="non-zero"),
        pytest.param(
            {"exit_code": 137, "signal": "SIGKILL"}, FailureReason.exit_code, 137, False, False, id="signal"
        ),
        pytest.param(
            {"launch_error": "command not found"},
            FailureReason.launch_error,
            None,
            False,
            False,
            id="launch-error",
        ),
        pytest.param(
            {"exit_code": 143, "timed_out": True}, FailureReason.timeout, 143, True, False, id="timeout"
        ),
        pytest.param(
            {"exit_code": 143, "cancelled": True}, FailureReason.cancelled, 143, False, True, id="cancelled"
        ),
        pytest.param({"lost": True}, FailureReason.lost, None, False, False, id="lost"),
    ],
)
def test_exit_records_become_finished_events(
    record: dict[str, object],
    reason: FailureReason | None,
    exit_code: int | None,
    timed_out: bool,
    cancelled: bool,
) -> None:
    end = outcome_of(record, at=AT, result=None)
    assert (end.reason, end.exit_code, end.state is State.timed_out, end.state is State.cancelled) == (
        reason,
        exit_code,
        timed_out,
        cancelled,
    )
    assert end.state is (State.succeeded if reason is None else _STATE_OF.get(reason, State.failed))
    assert end.at == AT
    assert (end.message == "") == (reason is None)


_STATE_OF = {FailureReason.timeout: State.timed_out, FailureReason.cancelled: State.cancelled}


def test_an_oversized_result_is_explained() -> None:
    end = outcome_of({"exit_code": 0}, at=AT, result=None, result_problem="too big")
    assert (end.state, end.reason) == (State.succeeded, None)
    assert end.message == "too big"


def test_a_result_is_kept_whichever_way_the_job_ended() -> None:
    for record in ({"exit_code": 0}, {"exit_code": 2}):
        assert outcome_of(record, at=AT, result=b"{}").result == b"{}"


def test_output_the_disk_refused_is_told_with_the_outcome() -> None:
    record = {"exit_code": 0, "log_lost_bytes": 2048, "log_error": "No space left on device"}
    end = outcome_of(record, at=AT, result=None, result_problem="too big")
    assert (end.state, end.reason) == (State.succeeded, None)
    assert end.message == (
        "2048 bytes of its output are missing from its log (No space left on device, on its run "
        "directory's disk); too big"
    )


def test_the_gateways_own_cuda_visible_devices_limits_the_gpus_offered() -> None:
    from elasticityops.backends.local.gpus import visible_gpus

    detected = [(0, "NVIDIA L4"), (1, "NVIDIA L4"), (2, "NVIDIA H100"), (3, "NVIDIA H100")]
    assert visible_gpus(detected, None) == (detected, None)
    assert visible_gpus(detected, "3,2") == ([(3, "NVIDIA H100"), (2, "NVIDIA H100")], None)
    assert visible_gpus(detected, "2,9,2") == ([(2, "NVIDIA H100")], None)  # absent and repeated
    assert visible_gpus(detected, "") == ([], None)  # CUDA's "no GPU"
    chosen, warning = visible_gpus(detected, "GPU-1234abcd")
    assert chosen == detected
    assert warning is not None
    assert "indices" in warning
    slots = plan_slots(None, False, visible_gpus(detected, "3,2")[0])
    assert [(s.index, s.physical) for s in slots] == [(0, 3), (1, 2)]
