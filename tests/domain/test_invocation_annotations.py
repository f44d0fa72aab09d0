"""The one check of per-invocation annotations (API, client and CLI all call it): pure."""

from __future__ import annotations

import pytest

from elasticityops.domain import invocation_annotations as hints
from elasticityops.domain.errors import InvalidInput


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param([], {}, id="none"),
        pytest.param(["eops.dev/run-seconds=12"], {"eops.dev/run-seconds": "12"}, id="one"),
        pytest.param(["eops.dev/run-seconds=0.5"], {"eops.dev/run-seconds": "0.5"}, id="fraction"),
        pytest.param(["eops.dev/exit-code=255"], {"eops.dev/exit-code": "255"}, id="largest-exit-code"),
        pytest.param(["eops.dev/tag=a=b"], {"eops.dev/tag": "a=b"}, id="value-after-the-first-equals"),
        pytest.param(["eops.dev/tag="], {"eops.dev/tag": ""}, id="empty-value"),
        pytest.param(["eops.dev/a.b_c-D9=x"], {"eops.dev/a.b_c-D9": "x"}, id="name-characters"),
    ],
)
def test_good_params_parse(raw: list[str], expected: dict[str, str]) -> None:
    assert hints.parse_params(raw, "annotation") == expected


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        pytest.param(["eops.dev/x"], "has no '='", id="no-equals"),
        pytest.param(["=1"], "not under eops.dev/", id="empty-key"),
        pytest.param(["EOPS.DEV/x=1"], "not under eops.dev/", id="prefix-is-case-sensitive"),
        pytest.param(["eops.dev/=1"], "not a valid annotation key", id="empty-name"),
        pytest.param(["eops.dev/a/b=1"], "not a valid annotation key", id="two-slashes"),
        pytest.param(["eops.dev/run-seconds=1e3"], "not a number of seconds", id="exponent"),
        pytest.param(["eops.dev/run-seconds=inf"], "not a number of seconds", id="infinite"),
        pytest.param(["eops.dev/exit-code=-1"], "not an exit code", id="negative-exit-code"),
        pytest.param(["eops.dev/x=\n"], "control character", id="newline"),
    ],
)
def test_bad_params_name_the_field(raw: list[str], words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        hints.parse_params(raw, "annotation")
    assert [p.field for p in caught.value.problems] == ["annotation"]
    assert words in caught.value.problems[0].problem
    assert caught.value.problems[0].fix


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(InvalidInput) as caught:
        hints.parse_params(["nope", "x/y=1", "eops.dev/exit-code=300"], "--annotation")
    assert len(caught.value.problems) == 3
    assert {p.field for p in caught.value.problems} == {"--annotation"}


def test_a_long_bad_key_is_cut_short_in_the_message() -> None:
    with pytest.raises(InvalidInput) as caught:
        hints.check({"k" * 5000: "1"}, "annotations")
    assert len(caught.value.message) < 400


def test_the_dev_cluster_reads_the_keys_checked_here() -> None:
    from elasticityops.devcluster.stages import EXIT_CODE_ANNOTATION, RUN_SECONDS_ANNOTATION

    assert (RUN_SECONDS_ANNOTATION, EXIT_CODE_ANNOTATION) == (hints.RUN_SECONDS, hints.EXIT_CODE)
