"""A test job that does what its payload says and records what it saw.

Payload (all optional): {"sleep": seconds, "record": path, "exit": code, "result": any JSON,
"child": true (start a grandchild, sleeping 600 s, in the same process group),
"ignore_term": true (ignore SIGTERM, so only SIGKILL stops it), "print": text}

Each run appends JSON lines to `record`: {"event": "start" | "end", "id", "slot", "cuda",
"pid", "child_pid", "token", "callback", "cwd", "python", "t"}. Appends of one short line are
atomic, so concurrent jobs can share the file."""

import json
import os
import signal
import subprocess
import sys
import time


def record(path: str | None, line: dict[str, object]) -> None:
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(line) + "\n").encode())
        finally:
            os.close(fd)


def main() -> int:
    with open(os.environ["EOPS_PAYLOAD_PATH"], "rb") as fh:
        raw = fh.read()
    payload = json.loads(raw) if raw.strip() else {}
    if payload.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child_pid = None
    if payload.get("child"):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        child_pid = child.pid
    base = {
        "id": os.environ["EOPS_INVOCATION_ID"],
        "slot": os.environ["EOPS_GPU_SLOT"],
        "cuda": os.environ["CUDA_VISIBLE_DEVICES"],
        "pid": os.getpid(),
        "child_pid": child_pid,
        "token": os.environ.get("EOPS_CALLBACK_TOKEN"),
        "callback": os.environ.get("EOPS_CALLBACK_URL"),
        "cwd": os.getcwd(),
        "python": sys.executable,
    }
    record(payload.get("record"), {**base, "event": "start", "t": time.time()})
    if "print" in payload:
        print(payload["print"], flush=True)
    if "sleep" in payload:
        time.sleep(float(payload["sleep"]))
    if "result" in payload:
        with open(os.environ["EOPS_RESULT_PATH"], "w", encoding="utf-8") as fh:
            json.dump(payload["result"], fh)
    record(payload.get("record"), {**base, "event": "end", "t": time.time()})
    return int(payload.get("exit", 0))


if __name__ == "__main__":
    sys.exit(main())
