"""What a job is started with: its argv and environment. Pure functions.

The job gets only what it needs, never the gateway's own secrets (its EOPS_* settings, database
URL, cloud credentials, tokens): from the gateway's environment only the names in
`INHERITED` (PATH, HOME, locale, time zone and a few like them, so a program finds its tools and
speaks the right language), then the function's `env`, then the job's EOPS_* variables
(domain/job_env.py: EOPS_GPU_SLOT included) and these, which always win:

    CUDA_VISIBLE_DEVICES  the physical GPU index(es) of its slots; "" for virtual slots, so a
                          framework on a machine with GPUs does not grab one by accident
    CUDA_DEVICE_ORDER     PCI_BUS_ID (nvidia-smi's numbering, which the slots use)

Anything else a function needs (LD_LIBRARY_PATH, a proxy, its own settings) goes in its `env`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from elasticityops.backends.local.gpus import SlotDevice
from elasticityops.domain.job_env import CALLBACK_TOKEN, GPU_SLOT, job_variables

PYTHON_NAMES = frozenset({"python", "python3"})

# Taken from the gateway's environment as they are; nothing else is.
INHERITED = frozenset({"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM"})
INHERITED_PREFIXES = ("LC_",)


def inherited(name: str) -> bool:
    return name in INHERITED or name.startswith(INHERITED_PREFIXES)


def resolve_argv(command: Sequence[str], interpreter: str) -> list[str]:
    """A leading bare `python` / `python3` becomes `interpreter` (the gateway's own), so functions
    run in the environment ElasticityOps is installed in (e.g. its virtualenv) whatever PATH
    says. Any other command is left for the OS to find on PATH."""
    argv = list(command)
    if argv and argv[0] in PYTHON_NAMES:
        argv[0] = interpreter
    return argv


def job_env(
    base: Mapping[str, str],
    function_env: Mapping[str, str],
    *,
    invocation_id: str,
    payload_path: str,
    result_path: str,
    callback_url: str | None,
    callback_token: str,
    slots: Sequence[SlotDevice],
) -> dict[str, str]:
    env = {k: v for k, v in base.items() if inherited(k)}
    env.update(function_env)
    env.update(job_variables(invocation_id, payload_path, result_path, callback_url))
    env[CALLBACK_TOKEN] = callback_token
    env[GPU_SLOT] = ",".join(str(s.index) for s in slots)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(s.physical) for s in slots if s.physical is not None)
    # The indices are nvidia-smi's, which follow the PCI bus; CUDA numbers fastest-first unless
    # told otherwise, so on a machine of mixed GPUs slot N would get another GPU than it names.
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return env


def slot_node(slots: Sequence[SlotDevice]) -> str:
    """How the invocation's `node` names where it ran: `slot-0`, `slot-2+3`, with the GPU for
    physical slots (`slot-0/gpu0`)."""
    name = "slot-" + "+".join(str(s.index) for s in slots)
    physical = [s.physical for s in slots if s.physical is not None]
    if physical:
        name += "/gpu" + "+".join(str(p) for p in physical)
    return name
