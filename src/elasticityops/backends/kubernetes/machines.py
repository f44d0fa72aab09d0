"""GKE machine types and what a node of each leaves allocatable to pods, so a job's requests can
be sized to take a whole node: one GPU job per node, never two.

Allocatable follows GKE's documented reservations (kubelet + system): CPU 6% of the first core,
1% of the second, 0.5% of the next two, 0.25% of the rest; memory 25% of the first 4 GiB, 20%
of the next 4, 10% of the next 8, 6% of the next 112, 2% above 128 GiB, plus the 100 MiB
eviction threshold. Capacities are the Compute Engine catalogue's."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Machine:
    vcpus: int
    memory_gib: float


MACHINES: dict[str, Machine] = {
    "n1-standard-4": Machine(4, 15),
    "n1-standard-8": Machine(8, 30),
    "n1-standard-16": Machine(16, 60),
    "n1-standard-32": Machine(32, 120),
    "n1-highmem-4": Machine(4, 26),
    "n1-highmem-8": Machine(8, 52),
    "n1-highmem-16": Machine(16, 104),
    "g2-standard-4": Machine(4, 16),
    "g2-standard-8": Machine(8, 32),
    "g2-standard-12": Machine(12, 48),
    "g2-standard-16": Machine(16, 64),
    "g2-standard-32": Machine(32, 128),
    "a2-highgpu-1g": Machine(12, 85),
    "a2-highgpu-2g": Machine(24, 170),
    "a2-ultragpu-1g": Machine(12, 170),
    "a3-highgpu-1g": Machine(26, 234),
    "a3-highgpu-8g": Machine(208, 1872),
}


@dataclass(frozen=True)
class Allocatable:
    cpu_millis: int
    memory_mib: int


def _tiered(total: float, tiers: list[tuple[float, float]]) -> float:
    """Sum of rate x the part of `total` in each (width, rate) tier; the last width may be inf."""
    reserved, left = 0.0, total
    for width, rate in tiers:
        part = min(left, width)
        reserved += part * rate
        left -= part
        if left <= 0:
            break
    return reserved


def allocatable(machine: Machine) -> Allocatable:
    inf = float("inf")
    cpu_reserved = _tiered(machine.vcpus * 1000.0, [(1000, 0.06), (1000, 0.01), (2000, 0.005), (inf, 0.0025)])
    mem_mib = machine.memory_gib * 1024
    mem_reserved = _tiered(
        mem_mib, [(4096, 0.25), (4096, 0.20), (8192, 0.10), (112 * 1024, 0.06), (inf, 0.02)]
    )
    return Allocatable(
        cpu_millis=int(machine.vcpus * 1000 - cpu_reserved),
        memory_mib=int(mem_mib - mem_reserved - 100),
    )


def whole_node_requests(
    machine: Machine, daemonset_cpu_millis: int, daemonset_memory_mib: int
) -> Allocatable:
    """Requests that fit once per node after the daemonsets, and never twice (they exceed half
    of the allocatable on every machine in the table, checked in the tests)."""
    alloc = allocatable(machine)
    return Allocatable(
        cpu_millis=alloc.cpu_millis - daemonset_cpu_millis,
        memory_mib=alloc.memory_mib - daemonset_memory_mib,
    )


def parse_cpu_millis(quantity: str) -> int:
    """'3' -> 3000, '3500m' -> 3500, '0.5' -> 500 (the forms FunctionSpec accepts)."""
    if quantity.endswith("m"):
        return int(quantity[:-1])
    return round(float(quantity) * 1000)


_MEMORY_UNITS = {
    "Ki": 1 / 1024,
    "Mi": 1.0,
    "Gi": 1024.0,
    "Ti": 1024.0 * 1024,
    "K": 1000 / 1024 / 1024,
    "M": 1000**2 / 1024**2,
    "G": 1000**3 / 1024**2,
    "T": 1000**4 / 1024**2,
    "": 1 / 1024 / 1024,
}


def parse_memory_mib(quantity: str) -> float:
    """'12Gi' -> 12288, '512Mi' -> 512, '1G' -> 953.67 (the forms FunctionSpec accepts)."""
    for suffix in ("Ki", "Mi", "Gi", "Ti", "K", "M", "G", "T"):
        if quantity.endswith(suffix):
            return float(quantity[: -len(suffix)]) * _MEMORY_UNITS[suffix]
    return float(quantity) * _MEMORY_UNITS[""]
