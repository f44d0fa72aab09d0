"""Console session cookies (api/console/session.py), pure: what is signed is read back, and
anything tampered with, expired or signed with another key is not; the CSRF value is bound to
the cookie."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from elasticityops.api.auth import hash_token
from elasticityops.api.console import session

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
KEY = session.session_key(b"s" * 32)
DIGEST = hash_token("eops_example")


def test_a_cookie_reads_back_as_its_token_until_it_expires() -> None:
    cookie = session.make_cookie(KEY, DIGEST, NOW + timedelta(hours=1))
    assert session.read_cookie(KEY, cookie, NOW) == DIGEST
    assert session.read_cookie(KEY, cookie, NOW + timedelta(minutes=59)) == DIGEST
    assert session.read_cookie(KEY, cookie, NOW + timedelta(hours=1)) is None


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda c: c.replace(DIGEST, hash_token("eops_other")), id="another-token"),
        pytest.param(lambda c: c.replace(".1", ".2", 1), id="longer-expiry"),
        pytest.param(lambda c: c[:-1] + ("A" if c[-1] != "A" else "B"), id="signature"),
        pytest.param(lambda c: c + "x", id="trailing-byte"),
        pytest.param(lambda c: "s2" + c[2:], id="version"),
        pytest.param(lambda c: "", id="empty"),
        pytest.param(lambda c: "é" * 10, id="non-ascii"),
    ],
)
def test_a_tampered_cookie_is_nobody(tamper: object) -> None:
    cookie = session.make_cookie(KEY, DIGEST, NOW + timedelta(hours=1))
    assert session.read_cookie(KEY, tamper(cookie), NOW) is None  # type: ignore[operator]


def test_another_gateways_key_reads_nothing_and_the_key_is_not_the_secret() -> None:
    cookie = session.make_cookie(KEY, DIGEST, NOW + timedelta(hours=1))
    assert session.read_cookie(session.session_key(b"t" * 32), cookie, NOW) is None
    assert KEY != b"s" * 32


def test_the_csrf_value_belongs_to_its_cookie() -> None:
    one = session.make_cookie(KEY, DIGEST, NOW + timedelta(hours=1))
    two = session.make_cookie(KEY, DIGEST, NOW + timedelta(hours=2))
    assert session.csrf_ok(KEY, one, session.csrf_value(KEY, one))
    assert not session.csrf_ok(KEY, one, session.csrf_value(KEY, two))
    assert not session.csrf_ok(KEY, one, None)
    assert not session.csrf_ok(KEY, one, "é")
