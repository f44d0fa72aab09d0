"""Results that one JSON parser takes and another refuses or changes, over HTTP on a real
gateway (issue 37): a job writes one (to its result file, or POSTs it with its callback token),
and every read of the invocation answers 200 with the result as the text the job wrote, the
answer to `?wait`, the invocation, and the list that `eops ls` and the console read. Before the
rule, an integer past 64 bits, a lone surrogate or deep nesting made each of them answer 500 for
every caller while the row was listed, and NaN or 1e400 came back as null."""

from __future__ import annotations

import uuid

import httpx
import pytest

from helpers.server import RunningServer

# The job writes the bytes it is sent as hex, to its result file or through its callback.
WRITES = (
    "import json, os, urllib.request; p = json.load(open(os.environ['EOPS_PAYLOAD_PATH'])); "
    "raw = bytes.fromhex(p['hex']); "
    "open(os.environ['EOPS_RESULT_PATH'], 'wb').write(raw) if p['via'] == 'file' else "
    "print(urllib.request.urlopen(urllib.request.Request(os.environ['EOPS_CALLBACK_URL'], data=raw, "
    "headers={'Authorization': 'Bearer ' + os.environ['EOPS_CALLBACK_TOKEN'], "
    "'Content-Type': 'application/json'})).status)"
)

ODD = {
    "integer-past-64-bits": b'{"n": 18446744073709551616}',
    "lone-surrogate": b'{"s": "\\ud800"}',
    "nested-2000-deep": b"[" * 2000 + b"]" * 2000,
    "nan": b'{"x": NaN}',
    "infinity": b"[1e400]",
    "key-twice": b'{"a": 1, "a": 2}',
    "not-utf8": b"caf\xe9",
}


@pytest.fixture(scope="module")
def writer(gateway: RunningServer) -> str:
    name = "odd-" + uuid.uuid4().hex[:8]
    with gateway.client() as client:
        answer = client.put(f"/v1/functions/{name}", json={"command": ["python", "-c", WRITES]})
        assert answer.status_code == 201, answer.text
    return name


@pytest.mark.parametrize("via", ["file", "callback"])
@pytest.mark.parametrize("case", sorted(ODD))
def test_an_odd_result_is_served_as_its_text_by_every_read(
    gateway: RunningServer, writer: str, case: str, via: str
) -> None:
    raw = ODD[case]
    text = raw.decode("utf-8", errors="replace")
    with gateway.client(timeout=120) as client:
        waited = client.post(
            f"/v1/functions/{writer}/invocations?wait=60", json={"hex": raw.hex(), "via": via}
        )
        assert waited.status_code == 200, waited.text
        assert waited.json()["state"] == "succeeded", waited.json()
        assert waited.json()["result"] == text
        inv = waited.json()["id"]
        one = client.get(f"/v1/invocations/{inv}")
        assert one.status_code == 200, one.text
        assert one.json()["result"] == text
        listed = client.get("/v1/invocations", params={"limit": 500})
        assert listed.status_code == 200, listed.text
        [item] = [i for i in listed.json()["items"] if i["id"] == inv]
        assert item["result"] is None  # a list carries a summary; the invocation the result
        assert item["result_summary"] == one.json()["result_summary"]
        assert item["result_summary"]["preview"].startswith('"')  # the JSON string of its text


def test_strict_json_is_served_as_json_exactly(gateway: RunningServer, writer: str) -> None:
    raw = b'{"n": 18446744073709551615, "s": "\\ud83d\\ude00", "x": 1.5e300, "deep": [[[[1]]]]}'
    with gateway.client(timeout=120) as client:
        waited = client.post(
            f"/v1/functions/{writer}/invocations?wait=60", json={"hex": raw.hex(), "via": "file"}
        )
        assert waited.status_code == 200, waited.text
        assert waited.json()["result"] == {"n": 2**64 - 1, "s": "\U0001f600", "x": 1.5e300, "deep": [[[[1]]]]}


def test_the_cli_lists_and_shows_an_odd_result(gateway: RunningServer, writer: str) -> None:
    # eops ls and eops status read the same answers: no traceback, the result as text.
    import subprocess

    from helpers.server import EOPS

    with httpx.Client(base_url=gateway.url, headers=gateway.auth, timeout=120) as client:
        raw = ODD["lone-surrogate"]
        inv = client.post(
            f"/v1/functions/{writer}/invocations?wait=60", json={"hex": raw.hex(), "via": "file"}
        ).json()["id"]
    for argv in (["ls"], ["status", inv]):
        done = subprocess.run([EOPS, *argv], capture_output=True, text=True, env=gateway.env(), timeout=60)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr


BIG = (
    "import os; open(os.environ['EOPS_RESULT_PATH'], 'w').write('[' + ','.join(['123456789'] * 100000) + ']')"
)


def test_a_list_carries_each_results_summary_and_the_invocation_the_result(gateway: RunningServer) -> None:
    # issue 37: a list embedded every result whole (60 results of 1 MiB: a 63 MB answer).
    name = "big-" + uuid.uuid4().hex[:8]
    with gateway.client(timeout=120) as client:
        assert client.put(f"/v1/functions/{name}", json={"command": ["python", "-c", BIG]}).status_code == 201
        ids = [
            client.post(f"/v1/functions/{name}/invocations?wait=60", json={}).json()["id"] for _ in range(6)
        ]
        listed = client.get("/v1/invocations", params={"function": name, "limit": 500})
        assert listed.status_code == 200, listed.text
        assert len(listed.content) < 32 * 1024, len(listed.content)  # six 1 MB results: was 6 MB
        items = listed.json()["items"]
        assert sorted(i["id"] for i in items) == sorted(ids)
        for item in items:
            assert item["result"] is None
            assert item["result_summary"]["bytes"] == 1 + 100000 * 10
            assert item["result_summary"]["preview"].startswith("[123456789,123456789,")
        one = client.get(f"/v1/invocations/{ids[0]}").json()
        assert one["result"] == [123456789] * 100000
