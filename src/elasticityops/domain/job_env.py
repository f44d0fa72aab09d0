"""The job's environment contract: the EOPS_* variables every backend starts a job with, after the
function's own `env` (so they always win), and what each carries. Pure; each backend passes the
values it has (backends/local/jobenv.py, backends/kubernetes/manifests.py).

    EOPS_INVOCATION_ID    the invocation's id
    EOPS_PAYLOAD_PATH     file holding the request body
    EOPS_RESULT_PATH      file the job may write its result to (JSON or text); read when it ends
    EOPS_CALLBACK_URL     where the job may POST its result instead (absent when not configured)
    EOPS_CALLBACK_TOKEN   bearer token for that POST, valid for this invocation only
    EOPS_GPU_SLOT         the local backend's: the slot number(s) the job holds, comma-separated
                          ("0", "2,3")"""

from __future__ import annotations

INVOCATION_ID = "EOPS_INVOCATION_ID"
PAYLOAD_PATH = "EOPS_PAYLOAD_PATH"
RESULT_PATH = "EOPS_RESULT_PATH"
CALLBACK_URL = "EOPS_CALLBACK_URL"
CALLBACK_TOKEN = "EOPS_CALLBACK_TOKEN"
GPU_SLOT = "EOPS_GPU_SLOT"


def job_variables(
    invocation_id: str, payload_path: str, result_path: str, callback_url: str | None
) -> dict[str, str]:
    """The contract's variables that every backend passes as values, in the order the job gets
    them; the callback token comes next (CALLBACK_TOKEN), as a value or, on Kubernetes, from
    the invocation's Secret, so that it is never in the Job's spec."""
    env = {INVOCATION_ID: invocation_id, PAYLOAD_PATH: payload_path, RESULT_PATH: result_path}
    if callback_url:
        env[CALLBACK_URL] = callback_url
    return env
