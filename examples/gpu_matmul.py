"""Matrix multiplication on the GPU this invocation was given, or on the CPU without one.

Payload: {"n": 2048, "repeat": 10}. Result: the device used, the library, n, repeat, seconds,
GFLOP/s (2 n^3 per product) and a checksum of the last product."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any


def _payload() -> dict[str, Any]:
    with open(os.environ["EOPS_PAYLOAD_PATH"], "rb") as fh:
        raw = fh.read()
    data = json.loads(raw) if raw.strip() else {}
    return data if isinstance(data, dict) else {}


def _has_gpu() -> bool:
    # An empty CUDA_VISIBLE_DEVICES is a virtual slot: no real GPU is ours to use.
    return os.environ.get("CUDA_VISIBLE_DEVICES", "") != ""


def _torch(n: int, repeat: int) -> tuple[str, str, float, float] | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    a = torch.rand((n, n), device="cuda", dtype=torch.float32)
    b = torch.rand((n, n), device="cuda", dtype=torch.float32)
    (a @ b).sum().item()  # warm-up: kernel selection and lazy initialisation
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        c = a @ b
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return f"cuda:0 ({torch.cuda.get_device_name(0)})", "torch", seconds, float(c.sum().item())


def _cupy(n: int, repeat: int) -> tuple[str, str, float, float] | None:
    try:
        import cupy
    except ImportError:
        return None
    try:
        device = cupy.cuda.Device(0)
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception:  # no usable device or driver
        return None
    a = cupy.random.rand(n, n, dtype=cupy.float32)
    b = cupy.random.rand(n, n, dtype=cupy.float32)
    float((a @ b).sum())
    device.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        c = a @ b
    device.synchronize()
    seconds = time.perf_counter() - start
    return f"cuda:0 ({name})", "cupy", seconds, float(c.sum())


def _numpy(n: int, repeat: int) -> tuple[str, str, float, float]:
    import numpy

    rng = numpy.random.default_rng(0)
    a = rng.random((n, n), dtype=numpy.float32)
    b = rng.random((n, n), dtype=numpy.float32)
    start = time.perf_counter()
    c = a
    for _ in range(repeat):
        c = a @ b
    seconds = time.perf_counter() - start
    return "cpu", "numpy", seconds, float(c.sum())


def main() -> None:
    payload = _payload()
    n = int(payload.get("n", 2048))
    repeat = int(payload.get("repeat", 10))
    outcome = None
    if _has_gpu():
        attempts: list[Callable[[int, int], tuple[str, str, float, float] | None]] = [_torch, _cupy]
        for attempt in attempts:
            outcome = attempt(n, repeat)
            if outcome is not None:
                break
        if outcome is None:
            print("a GPU was assigned but neither torch nor cupy can use it; falling back to the CPU")
    else:
        print("no GPU assigned to this invocation (virtual slot); running on the CPU with numpy")
    if outcome is None:
        outcome = _numpy(n, repeat)
    device, library, seconds, checksum = outcome
    gflops = 2.0 * n**3 * repeat / seconds / 1e9
    print(f"{repeat} x {n}x{n} float32 matmul on {device} with {library}: ", end="")
    print(f"{seconds:.3f}s, {gflops:.1f} GFLOP/s")
    result = {
        "device": device,
        "library": library,
        "gpu": device != "cpu",
        "n": n,
        "repeat": repeat,
        "seconds": round(seconds, 6),
        "gflops": round(gflops, 2),
        "checksum": checksum,
    }
    with open(os.environ["EOPS_RESULT_PATH"], "w", encoding="utf-8") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    main()
