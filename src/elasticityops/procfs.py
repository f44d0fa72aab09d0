"""/proc/PID/stat (Linux), read the one way that survives any command name.

Standard library only: the local backend's job supervisor imports it and must start fast."""

from __future__ import annotations

from pathlib import Path


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name: [0] is the state (field 3 in
    proc(5)), [1] the parent's PID, [19] the start in clock ticks after boot. None when there
    is no such file to read (the process is gone, or this is not Linux)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces and parentheses itself.
    return stat[stat.rfind(")") + 2 :].split()
