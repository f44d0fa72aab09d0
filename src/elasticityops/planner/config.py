"""Flags and YAML keys -> typed settings. A YAML key is spelled like its flag (`scale-down-after`;
`scale_down_after` is accepted too); a flag given on the command line wins over the file."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

from elasticityops.planner.distributions import Distribution, parse_distribution
from elasticityops.planner.errors import PlannerInputError
from elasticityops.planner.settings import ClusterSettings


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"true", "yes", "1", "on"}:
        return True
    if text in {"false", "no", "0", "off"}:
        return False
    raise ValueError(value)


def _int(value: Any) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(value)
    return int(value)


def _dist(value: Any) -> Distribution:
    return value if isinstance(value, Distribution) else parse_distribution(str(value))


# flag name -> (ClusterSettings field, converter)
SETTINGS_FLAGS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "baseline": ("baseline", _int),
    "max-nodes": ("max_nodes", _int),
    "node-pools": ("node_pools", _int),
    "pool-size-limit": ("pool_size_limit", _int),
    "scan-interval": ("scan_interval_s", float),
    "gpu-scale-up-delay": ("gpu_scale_up_delay_s", float),
    "provision-delay": ("provision_delay", _dist),
    "max-provision-time": ("max_provision_time_s", float),
    "scale-down-after": ("scale_down_after_s", float),
    "scale-down-parallelism": ("scale_down_parallelism", _int),
    "node-delete-time": ("node_delete_time_s", float),
    "scale-down-delay-after-add": ("scale_down_delay_after_add_s", float),
    "scale-down-delay-after-failure": ("scale_down_delay_after_failure_s", float),
    "stockout-probability": ("stockout_probability", float),
    "backoff-initial": ("backoff_initial_s", float),
    "backoff-max": ("backoff_max_s", float),
    "backoff-reset": ("backoff_reset_s", float),
    "preemption-rate": ("preemption_rate_per_hour", float),
    "spot": ("spot", _bool),
    "price": ("price_per_node_hour", float),
    "min-billed": ("min_billed_s", float),
    "headroom-interval": ("headroom_interval_s", float),
    "rate-window": ("rate_window_s", float),
    "horizon": ("horizon_s", float),
    "timeline-step": ("timeline_step_s", float),
    "seed": ("seed", _int),
}
assert {f for f, _ in SETTINGS_FLAGS.values()} == {f.name for f in fields(ClusterSettings)}


def load_config(path: Path, allowed: Iterable[str]) -> dict[str, Any]:
    """Read a YAML mapping whose keys are flag names (without `--`)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlannerInputError(f"--config: cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise PlannerInputError(f"--config: {path}{where}: not valid YAML") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PlannerInputError(f"--config: {path} must be a mapping of flag names to values")
    allowed_set = set(allowed)
    out: dict[str, Any] = {}
    for key, value in data.items():
        flag = str(key).strip().lstrip("-").replace("_", "-")
        if flag not in allowed_set:
            raise PlannerInputError(
                f"--config: {path}: unknown key {key!r}; "
                f"keys are flag names: {', '.join(sorted(allowed_set))}"
            )
        out[flag] = value
    return out


def merge(config: Mapping[str, Any], flags: Mapping[str, Any]) -> dict[str, Any]:
    """Flags given on the command line (not None) override the config file."""
    merged = dict(config)
    merged.update({k: v for k, v in flags.items() if v is not None})
    return merged


def build_settings(values: Mapping[str, Any]) -> ClusterSettings:
    """ClusterSettings from flag-named values; unknown names are ignored (they belong to commands)."""
    kwargs: dict[str, Any] = {}
    for flag, (name, convert) in SETTINGS_FLAGS.items():
        if flag in values and values[flag] is not None:
            try:
                kwargs[name] = convert(values[flag])
            except PlannerInputError:
                raise
            except (TypeError, ValueError):
                raise PlannerInputError(f"--{flag}: invalid value {values[flag]!r}") from None
    return ClusterSettings(**kwargs)


def settings_dict(settings: ClusterSettings) -> dict[str, Any]:
    """Flag-named, JSON-ready view of the settings (for summary.json)."""
    out: dict[str, Any] = {}
    for flag, (name, _) in SETTINGS_FLAGS.items():
        value = getattr(settings, name)
        out[flag] = str(value) if isinstance(value, Distribution) else value
    out["price-effective"] = settings.node_price_per_hour
    return out
