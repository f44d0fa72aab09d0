#!/usr/bin/env bash
# Device check: the local backend's physical-GPU path on a real NVIDIA GPU.
#
# What it proves, on a machine with one NVIDIA GPU (the device tool's H200):
#   0. `nvidia-smi -L` is parsed into one physical slot (gpus.detect_gpus / plan_slots);
#   a. `eops serve --example` runs gpu-matmul on that GPU: the job gets CUDA_VISIBLE_DEVICES=0,
#      torch (or cupy) sees the GPU, the result names it and the node is `slot-0/gpu0`;
#   b. three gpu-matmul invocations sent at once never share the GPU: their running intervals
#      (timeline.started .. timeline.finished) do not overlap -> PASS/FAIL;
#   c. the local backend's pytest tests pass there (they inject GPUs or use virtual slots);
#   d. the gateway stops on SIGTERM (by its PID).
# Everything printed also goes to $OUT/gpu-check.log; the gateway's own log to $OUT/serve.log.
# Exit status 0 only when every check passed.
#
# Run it through the device tool (the runtime dependencies missing on its image travel as
# wheels in .whl/, see /work/.library/device/README.md; `.whl` must be named in carry):
#   run(command="bash scripts/device-gpu-check.sh", carry=[".whl"], timeout_s=420)
# It also runs on a machine without GPUs (virtual slot, torch-free CPU fallback): the GPU
# checks then say SKIP and the verdict is DRY RUN; pass SKIP_INSTALL=1 to use the current
# Python environment instead of installing .whl/ into /tmp/site.
set -uo pipefail

export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/eops-gpu-check}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PORT=${PORT:-18080}
DATA=/tmp/eops-gpu-check-data
WORK=/tmp/eops-gpu-check-work
PAYLOAD=${PAYLOAD:-'{"n": 8192, "repeat": 50}'}
mkdir -p "$OUT"

EOPS_MAIN='from elasticityops.cli.main import main; main()'
# `eops` from the working tree (src/ is on PYTHONPATH), without installing the package.
eops() { python3 -c "$EOPS_MAIN" "$@"; }

section() { printf '\n=== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

main() {
    local failed=0 gpu=0 server_pid="" id=""
    cd "$REPO" || return 2
    rm -rf "$DATA" "$WORK" && mkdir -p "$WORK"

    section "environment"
    if [[ ${SKIP_INSTALL:-0} != 1 ]]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl || return 2
        export PYTHONPATH="/tmp/site:$REPO/src${PYTHONPATH:+:$PYTHONPATH}"
    fi
    python3 --version
    python3 - <<'PY' || return 2
import importlib.metadata as md
names = ["fastapi", "starlette", "uvicorn", "pydantic", "sqlalchemy", "typer", "click", "rich",
         "httpx", "anyio", "typing_extensions", "prometheus-client", "psutil", "pyyaml", "numpy",
         "torch", "cupy-cuda13x", "pytest"]
for name in names:
    try:
        print(f"  {name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"  {name} -")
import elasticityops.cli.main  # noqa: F401  the CLI imports with these versions
print("  elasticityops imports from", elasticityops.__file__)
PY

    section "0. nvidia-smi -L and the slots the local backend plans from it"
    if command -v nvidia-smi >/dev/null && nvidia-smi -L; then
        gpu=1
    else
        echo "no nvidia-smi (or it failed): no GPU here, a DRY RUN on one virtual slot"
        PAYLOAD='{"n": 512, "repeat": 5}'  # numpy on the CPU: keep it small
    fi
    python3 - <<'PY' || failed=1
from elasticityops.backends.local.gpus import detect_gpus, plan_slots
detected = detect_gpus()
print("detect_gpus():", detected)
for slot in plan_slots(None, False, detected):
    print("  slot", slot)
PY

    section "start the gateway: eops serve --example (local backend)"
    # One slot either way: the physical GPU, or (dry run) one virtual slot.
    local gpus_flag=()
    [[ $gpu == 1 ]] || gpus_flag=(--gpus 1)
    # python3 itself in the background (not the eops function: $! would be a subshell's PID).
    python3 -c "$EOPS_MAIN" serve --data-dir "$DATA" --port "$PORT" --example "${gpus_flag[@]}" \
        >"$OUT/serve.log" 2>&1 &
    server_pid=$!
    echo "gateway PID $server_pid, log in \$OUT/serve.log"
    # shellcheck disable=SC2064  # expand now: stop this PID whatever happens below
    trap "kill $server_pid 2>/dev/null" EXIT
    export EOPS_URL="http://127.0.0.1:$PORT"
    if ! python3 - "$EOPS_URL" "$server_pid" <<'PY'; then
import os, sys, time, urllib.request
url, pid = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit("the gateway exited before it was ready")
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=2) as reply:
            print("readyz:", reply.status, reply.read().decode())
            sys.exit(0)
    except OSError:
        time.sleep(0.3)
sys.exit("not ready after 60 s")
PY
        cat "$OUT/serve.log"
        return 1
    fi
    sed -n '1,20s/EOPS_TOKEN=.*/EOPS_TOKEN=(in the data dir)/p' "$OUT/serve.log"
    EOPS_TOKEN=$(cat "$DATA/admin-token") && export EOPS_TOKEN
    python3 - "$EOPS_URL" <<'PY'
import os, sys, urllib.request
req = urllib.request.Request(sys.argv[1] + "/metrics", headers={"Authorization": "Bearer " + os.environ["EOPS_TOKEN"]})
with urllib.request.urlopen(req, timeout=5) as reply:
    for line in reply.read().decode().splitlines():
        if line.startswith("eops_gpus"):
            print("metrics:", line)
PY
    eops fn ls

    section "a. eops invoke gpu-matmul --data '$PAYLOAD' --wait"
    timeout 180 python3 -c "$EOPS_MAIN" invoke gpu-matmul --data "$PAYLOAD" --wait 2>&1 | tee "$WORK/a.txt"
    id=$(grep -o 'inv-[A-Za-z0-9_-]*' "$WORK/a.txt" | head -n 1)
    if [[ -z $id ]]; then
        echo "a: FAIL (no invocation id in the output)"
        failed=1
    else
        echo "--- eops status $id"
        eops status "$id"
        echo "--- eops logs $id"
        eops logs "$id"
        echo "--- what the job was started with ($DATA/runs/$id/launch.json)"
        eops status "$id" --json >"$WORK/a.json"
        python3 - "$DATA/runs/$id/launch.json" "$WORK/a.json" "$gpu" <<'PY' || failed=1
import json, sys
launch = json.load(open(sys.argv[1]))
inv = json.load(open(sys.argv[2]))
gpu = sys.argv[3] == "1"
env = launch["env"]
print(f"argv {launch['argv']}  slots {launch['slots']}  node {launch['node']}")
print(f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r}  EOPS_GPU_SLOT={env['EOPS_GPU_SLOT']!r}")
result = inv.get("result") or {}
print("result:", json.dumps(result))
checks = {"succeeded": inv["state"] == "succeeded"}
if gpu:
    checks.update({
        "CUDA_VISIBLE_DEVICES=0": env["CUDA_VISIBLE_DEVICES"] == "0",
        "node slot-0/gpu0": inv.get("node") == "slot-0/gpu0",
        "result says GPU": result.get("gpu") is True and str(result.get("device", "")).startswith("cuda"),
    })
else:
    checks["virtual slot (dry run)"] = env["CUDA_VISIBLE_DEVICES"] == "" and result.get("gpu") is False
for name, ok in checks.items():
    print(f"  {'ok  ' if ok else 'FAIL'} {name}")
ok = all(checks.values())
print("a:", "PASS" if ok else "FAIL", "" if gpu else "(DRY RUN: no GPU here)")
sys.exit(0 if ok else 1)
PY
    fi

    section "b. three gpu-matmul invocations at once, on one GPU"
    # The GPU's own view, sampled while they run (not every sandbox lists processes).
    local sampler=""
    if [[ $gpu == 1 ]]; then
        (while sleep 0.25; do
            nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>/dev/null | tr '\n' ';'
            echo
        done) >"$WORK/smi-samples.txt" &
        sampler=$!
    fi
    local i pids=()
    for i in 1 2 3; do
        eops invoke gpu-matmul --data "$PAYLOAD" >"$WORK/id$i" 2>/dev/null &
        pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || failed=1; done
    python3 - "$gpu" "$DATA/runs" "$WORK/id1" "$WORK/id2" "$WORK/id3" <<'PY' || failed=1
import json, sys
from pathlib import Path
from elasticityops.client import Client

gpu = sys.argv[1] == "1"
runs_dir = Path(sys.argv[2])
ids = [open(path).read().strip() for path in sys.argv[3:]]
print("invocations:", ", ".join(ids))
with Client() as client:
    invs = [client.wait(i, timeout=180) for i in ids]
runs = []
ok = True
for inv in invs:
    tl = inv.timeline
    result = inv.result if isinstance(inv.result, dict) else {}
    print(f"{inv.id}: {inv.state.value} node={inv.node} device={result.get('device')} "
          f"gflops={result.get('gflops')}")
    env = json.loads((runs_dir / inv.id / "launch.json").read_text())["env"]
    print(f"   CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r} EOPS_GPU_SLOT={env['EOPS_GPU_SLOT']!r}")
    print(f"   accepted {tl.accepted.time()}  dispatched {tl.dispatched and tl.dispatched.time()}  "
          f"started {tl.started and tl.started.time()}  finished {tl.finished and tl.finished.time()}")
    if inv.state.value != "succeeded" or tl.started is None or tl.finished is None:
        ok = False
        continue
    if gpu and (inv.node != "slot-0/gpu0" or result.get("gpu") is not True):
        print("   FAIL: not on slot-0/gpu0 with a GPU result")
        ok = False
    runs.append((tl.started, tl.finished, inv.id))
runs.sort()
print("running intervals, in order of start:")
for n, (start, end, inv_id) in enumerate(runs):
    gap = "" if n == 0 else f"  gap after previous: {(start - runs[n - 1][1]).total_seconds():+.3f} s"
    print(f"   {inv_id}  {start.time()} .. {end.time()}  ({(end - start).total_seconds():.3f} s){gap}")
overlaps = [(a[2], b[2]) for a, b in zip(runs, runs[1:]) if b[0] < a[1]]
if overlaps:
    print("   FAIL: overlapping:", overlaps)
    ok = False
if len(runs) != 3:
    ok = False
print("b:", "PASS" if ok else "FAIL", "(never two at once on the one slot)",
      "" if gpu else "(DRY RUN: a virtual slot, no GPU here)")
sys.exit(0 if ok else 1)
PY
    if [[ -n $sampler ]]; then
        kill "$sampler" 2>/dev/null
        wait "$sampler" 2>/dev/null
        python3 - "$WORK/smi-samples.txt" <<'PY'
import sys
samples = [line.strip() for line in open(sys.argv[1])]
counts = [len([p for p in s.split(";") if p.strip()]) for s in samples]
seen = sorted({s for s in samples if s})
print(f"nvidia-smi compute processes: {len(samples)} samples, at most {max(counts, default=0)} at once; "
      f"distinct readings: {seen[:8]}")
PY
    fi
    for i in 1 2 3; do
        echo "--- eops status $(cat "$WORK/id$i")"
        eops status "$(cat "$WORK/id$i")"
    done

    section "c. pytest tests/backends/local (local backend; GPUs injected or virtual)"
    timeout 240 python3 -m pytest tests/backends/local -q -p no:cacheprovider || failed=1

    section "d. stop the gateway (SIGTERM to PID $server_pid)"
    kill -TERM "$server_pid"
    local waited=0
    while kill -0 "$server_pid" 2>/dev/null && ((waited < 40)); do
        sleep 0.5
        waited=$((waited + 1))
    done
    if kill -0 "$server_pid" 2>/dev/null; then
        echo "d: FAIL (still running after 20 s; killing it)"
        kill -KILL "$server_pid"
        failed=1
    else
        wait "$server_pid"
        # 143 = 128 + SIGTERM: uvicorn shuts down gracefully, then re-raises the signal.
        echo "d: PASS (the gateway exited with status $? after ~$((waited / 2)) s)"
    fi
    trap - EXIT
    tail -n 5 "$OUT/serve.log"

    section "verdict"
    if ((failed)); then
        echo "FAIL"
    elif [[ $gpu == 1 ]]; then
        echo "PASS: the local backend ran every invocation on the physical GPU, one at a time"
    else
        echo "DRY RUN passed (no GPU here: virtual slot)"
    fi
    return "$failed"
}

main 2>&1 | tee "$OUT/gpu-check.log"
