"""A function spec deployed from a file: its relative paths are relative to the file's
directory, wherever the gateway (or the deploying shell) runs.

The one normalisation of a spec file, for every way one is deployed (`eops fn deploy`, the
Python client's `deploy_function(path)`, `eops serve --example`), so that the same file makes
the same stored spec and deploying it again keeps its version:

- `workdir` written in the file: a relative one is joined to the file's directory;
- no `workdir`, and an argument of `command` (not an option, not absolute) names a file or
  directory that exists relative to the file's directory: `workdir` becomes that directory;
- otherwise the spec is as written, and the local backend runs it in the gateway's own
  working directory.

`command` itself is never rewritten. The look at the disk is the caller's (`exists`)."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from pathlib import PurePath

from elasticityops.domain.functions import FunctionSpec, load_yaml, parse_function_spec


def load_spec_file(
    text: str, file: PurePath, exists: Callable[[str], bool], *, source: str | None = None
) -> FunctionSpec:
    """The spec `text` read from `file` (an absolute path, symlinks resolved), as deployed
    from it. `exists(path)`: whether that absolute path names a file or directory. `source`:
    the file as its problems name it (default: `file`)."""
    directory = str(file.parent)
    data = load_yaml(text, source or str(file))
    if isinstance(data, Mapping):
        written = data.get("workdir")
        if isinstance(written, str) and written and not posixpath.isabs(written):
            data = {**data, "workdir": posixpath.join(directory, written)}
    spec = parse_function_spec(data)
    if spec.workdir is None and _names_beside(spec, directory, exists):
        spec = spec.model_copy(update={"workdir": posixpath.normpath(directory)})
    return spec


def _names_beside(spec: FunctionSpec, directory: str, exists: Callable[[str], bool]) -> bool:
    """Whether an argument of `command` names something relative to `directory`: what makes it
    the spec's working directory."""
    return any(
        not arg.startswith("-") and not posixpath.isabs(arg) and exists(posixpath.join(directory, arg))
        for arg in spec.command
    )
