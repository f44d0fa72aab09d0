"""Sleeps for `seconds` from the payload (default 1), saying so once a second."""

import json
import os
import time


def main() -> None:
    with open(os.environ["EOPS_PAYLOAD_PATH"], "rb") as fh:
        raw = fh.read()
    payload = json.loads(raw) if raw.strip() else {}
    seconds = float(payload.get("seconds", 1)) if isinstance(payload, dict) else 1.0
    slot = os.environ["EOPS_GPU_SLOT"]
    print(f"sleeping {seconds:g}s on GPU slot {slot}", flush=True)
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(1.0, left))
        print(f"{max(0.0, deadline - time.monotonic()):.0f}s left", flush=True)
    with open(os.environ["EOPS_RESULT_PATH"], "w", encoding="utf-8") as fh:
        json.dump({"slept_seconds": seconds, "gpu_slot": slot}, fh)


if __name__ == "__main__":
    main()
