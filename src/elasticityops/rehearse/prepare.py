"""Everything `eops rehearse` decides and checks before the first policy runs: the options, the
trace, the cluster (the running dev cluster unless --kubeconfig names another), the policies
(the planner's syntax, and a gateway that takes them), the planner's predictions. Any refusal
is an `InvalidInput` or `PlannerInputError` naming the flag and the fix; nothing long has
started by then."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.devcluster.config import AutoscalerSettings
from elasticityops.domain.errors import EopsError, FieldProblem, InvalidInput
from elasticityops.planner.config import settings_dict
from elasticityops.planner.model import ModelStalledError
from elasticityops.planner.parallel_runs import usable_cores
from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.trace import Trace, load_trace
from elasticityops.rehearse import cluster
from elasticityops.rehearse.cluster_map import TIMELINE_STEP_S, planner_settings
from elasticityops.rehearse.driver import Rehearsal
from elasticityops.rehearse.options import RehearseOptions, dev_cluster_dir
from elasticityops.rehearse.predict import FLAG, Prediction, check_policy, predict


@dataclass(frozen=True)
class Target:
    """The cluster to rehearse on. `autoscaler`: its knobs, known for a dev cluster only."""

    kubeconfig: Path
    autoscaler: AutoscalerSettings | None
    where: str


@dataclass(frozen=True)
class Prepared:
    rehearsal: Rehearsal
    target: Target
    settings: ClusterSettings
    notes: tuple[str, ...]

    def cluster_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "where": self.target.where,
            "baseline_gpu_nodes": self.rehearsal.baseline_nodes,
        }
        if self.target.autoscaler is not None:
            out["autoscaler"] = asdict(self.target.autoscaler)
        return out

    def planner_dict(self) -> dict[str, Any]:
        return settings_dict(self.settings)


def _refuse(flag: str, problem: str, fix: str) -> InvalidInput:
    return InvalidInput([FieldProblem(flag, problem, fix)])


def find_target(options: RehearseOptions) -> Target:
    if options.kubeconfig is not None:
        path = options.kubeconfig.expanduser()
        if not path.is_file():
            raise _refuse("--kubeconfig", f"{path} is not a file", "pass the kubeconfig of the cluster")
        return Target(path, None, f"kubeconfig {path}")
    from elasticityops.devcluster.cluster import DevCluster
    from elasticityops.devcluster.errors import DevClusterError

    state_dir = (options.state_dir or dev_cluster_dir()).expanduser().resolve()
    fix = "start one with `eops dev-cluster up` (or pass --kubeconfig FILE for another cluster)"
    try:
        dev = DevCluster.attach(state_dir)
    except DevClusterError:
        raise _refuse("--kubeconfig", f"no dev cluster is running in {state_dir}", fix) from None
    if not dev.processes_alive().get("kube-apiserver", False) or not dev.kubeconfig_path.is_file():
        raise _refuse("--kubeconfig", f"the dev cluster in {state_dir} is not running", fix)
    try:
        knobs = dev.autoscaler_settings
    except (OSError, ValueError):
        knobs = None
    return Target(dev.kubeconfig_path, knobs, f"dev cluster in {state_dir}")


async def count_gpu_nodes(kubeconfig: Path) -> int:
    api = KubeApi.connect(KubernetesSettings(kubeconfig=str(kubeconfig), concurrency=4))
    try:
        return len(await cluster.gpu_nodes(api))
    finally:
        await api.close()


def window_end(options: RehearseOptions, trace: Trace) -> float | None:
    """Where the measured window ends in trace time: None for the last invocation's end."""
    return trace.span_s if options.measure_until == "last-arrival" else None


def check_out(out: Path | None) -> Path:
    if out is None:
        raise _refuse("--out", "is required", "name a directory for summary.json and the plots")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise _refuse("--out", f"{out} is a file, not a directory", "name a directory") from None
    except OSError as exc:
        raise _refuse(
            "--out", f"cannot make {out}: {exc.strerror or exc}", "name another directory"
        ) from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise _refuse("--out", f"cannot write in {out}", "name another directory")
    return out


def read_trace(path: Path | None) -> tuple[Trace, list[str]]:
    if path is None:
        raise _refuse("--trace", "is required", "pass a CSV (make one with `eops plan trace`)")
    trace, loaded = load_trace(path)
    notes = []
    if loaded.unsorted_rows:
        notes.append(
            f"trace was not sorted by arrival_s ({loaded.unsorted_rows} rows out of order); sorted it"
        )
    shifted = loaded.shift_note()
    if shifted:
        notes.append(shifted)
    if trace.function and len(set(trace.function)) > 1:
        notes.append(
            f"the trace names {len(set(trace.function))} functions; they are replayed as one T4 "
            "function (the planner models one node shape too)"
        )
    for column, values in unmodelled_columns(path).items():
        notes.append(
            f"the trace's {column} column holds {len(values)} values ({', '.join(sorted(values)[:3])}); "
            f"every request is replayed as one T4 function at normal priority, as the planner "
            "models it"
        )
    return trace, notes


def unmodelled_columns(path: Path) -> dict[str, set[str]]:
    """The trace's gpu_type and priority columns where they vary: the planner models one GPU
    type and one priority, and so does the rehearsal."""
    import csv

    found: dict[str, set[str]] = {}
    with path.open(newline="", encoding="utf-8") as handle:
        rows = csv.DictReader(handle)
        names = [n for n in ("gpu_type", "priority") if n in (rows.fieldnames or [])]
        for row in rows:
            for name in names:
                found.setdefault(name, set()).add((row.get(name) or "").strip())
    return {k: v for k, v in found.items() if len(v) > 1}


CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def local_cores(cpu_max: Path = CGROUP_CPU_MAX, environ: Mapping[str, str] = os.environ) -> int:
    """How many cores a Go program started from here runs on (GOMAXPROCS, as Go 1.25+ sets it:
    the variable if set, else the CPUs this process may use, capped by a cgroup v2 CPU limit
    rounded up, at least 2)."""
    setting = environ.get("GOMAXPROCS", "").strip()
    if setting.isdigit() and int(setting) > 0:
        return int(setting)
    cores = usable_cores()
    try:
        quota, period = cpu_max.read_text().split()[:2]
        limit = math.ceil(int(quota) / int(period)) if quota != "max" else None
    except (OSError, ValueError, ZeroDivisionError):
        limit = None
    return cores if limit is None else min(cores, max(2, limit))


def cluster_settings(target: Target, baseline_nodes: int) -> tuple[ClusterSettings, list[str]]:
    if target.autoscaler is not None:
        # a dev cluster runs on this machine: its kube-scheduler has these cores
        mapped = planner_settings(target.autoscaler, scheduler_cores=local_cores())
        return mapped.settings, list(mapped.notes)
    guess = ClusterSettings(baseline=baseline_nodes, min_billed_s=0.0, timeline_step_s=TIMELINE_STEP_S)
    return guess, [
        "the cluster's autoscaler settings are unknown (not a dev cluster): the prediction uses the "
        f"planner's defaults with the {baseline_nodes} GPU nodes found at the start as its baseline"
    ]


def check_syntax(policies: Sequence[str]) -> None:
    """Each policy parses (before the cluster is asked: its settings change no spelling)."""
    if not policies:
        raise _refuse(FLAG, "no policy given", "pass --headroom none (or warm:K, predictive, ...)")
    seen: set[str] = set()
    for spec in policies:
        check_policy(spec, ClusterSettings())
        key = spec.strip().lower()
        if key in seen:
            raise _refuse(FLAG, f"{spec} is given twice", "name each policy once")
        seen.add(key)


def check_policies(policies: Sequence[str], settings: ClusterSettings) -> tuple[str, ...]:
    """The policies, each checked on the cluster's settings."""
    for spec in policies:
        check_policy(spec, settings)
    return tuple(p.strip() for p in policies)


def predictions(
    trace: Trace,
    settings: ClusterSettings,
    policies: Sequence[str],
    warmup_s: float = 0.0,
    end_s: float | None = None,
) -> dict[str, Prediction | str]:
    out: dict[str, Prediction | str] = {}
    for spec in policies:
        try:
            out[spec] = predict(trace, settings, spec, warmup_s, end_s)
        except ModelStalledError as exc:
            out[spec] = f"the planner cannot model this run: {exc}"
    return out


async def prepare(options: RehearseOptions, policies: Sequence[str]) -> Prepared:
    """Check everything in the order a user fixes it: the trace, --out, the policies' spelling,
    the cluster, a gateway and client that can run them; then the predictions (seconds: the
    planner on a virtual clock)."""
    trace, notes = read_trace(options.trace)
    if options.warmup > trace.span_s:
        raise _refuse(
            "--warmup",
            f"{options.warmup:g} s leaves no request to measure (the last arrives at {trace.span_s:g} s)",
            "use a shorter warm-up or a longer trace",
        )
    out = check_out(options.out)
    check_syntax(policies)
    target = find_target(options)
    try:
        found = await count_gpu_nodes(target.kubeconfig)
    except EopsError as exc:
        raise _refuse(
            "--kubeconfig", f"cannot list the nodes of the {target.where}: {exc.message}", "check the cluster"
        ) from None
    baseline = target.autoscaler.baseline if target.autoscaler is not None else found
    settings, more = cluster_settings(target, baseline)
    checked = check_policies(policies, settings)
    rehearsal = Rehearsal(
        trace=trace,
        policies=checked,
        predictions=predictions(trace, settings, checked, options.warmup, window_end(options, trace)),
        kubeconfig=target.kubeconfig,
        baseline_nodes=baseline,
        out=out,
        options=options,
    )
    return Prepared(rehearsal, target, settings, tuple(notes + more))


def load_options(given: Mapping[str, Any], env: Mapping[str, str]) -> RehearseOptions:
    from elasticityops.knobs import load

    return load(RehearseOptions(), env, given)
