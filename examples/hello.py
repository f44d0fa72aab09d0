"""A trivial function: greets whoever the payload names and writes a JSON result.

What every function gets from ElasticityOps (see docs/functions.md):
EOPS_PAYLOAD_PATH (the request body), EOPS_RESULT_PATH (write the result here),
EOPS_INVOCATION_ID, EOPS_GPU_SLOT and CUDA_VISIBLE_DEVICES."""

import json
import os


def main() -> None:
    with open(os.environ["EOPS_PAYLOAD_PATH"], "rb") as fh:
        raw = fh.read()
    payload = json.loads(raw) if raw.strip() else {}
    name = payload.get("name", "world") if isinstance(payload, dict) else "world"
    greeting = f"{os.environ.get('GREETING', 'hello')}, {name}!"
    print(greeting, flush=True)
    print(f"invocation {os.environ['EOPS_INVOCATION_ID']} on GPU slot {os.environ['EOPS_GPU_SLOT']}")
    with open(os.environ["EOPS_RESULT_PATH"], "w", encoding="utf-8") as fh:
        json.dump({"greeting": greeting, "gpu_slot": os.environ["EOPS_GPU_SLOT"]}, fh)


if __name__ == "__main__":
    main()
