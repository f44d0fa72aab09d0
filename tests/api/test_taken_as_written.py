"""A function's command arguments and env values reach its job as written, over HTTP on a real
gateway (issue 37): the spec model stripped every string, so `echo "  two  "` lost its spaces.
Names and identifiers still lose surrounding whitespace, which is never meant there."""

from __future__ import annotations

import uuid

from helpers.server import RunningServer

SAYS = (
    "import json, os, sys; said = {'argv': sys.argv[1:], 'env': os.environ['PADDED']}; "
    "open(os.environ['EOPS_RESULT_PATH'], 'w').write(json.dumps(said))"
)


def test_arguments_and_env_values_keep_their_whitespace_identifiers_do_not(gateway: RunningServer) -> None:
    name = "padded-" + uuid.uuid4().hex[:8]
    spec = {
        "name": name,
        "image": " worker:1 ",
        "command": ["python", "-c", SAYS, "  two  ", " ", "\tthree\n"],
        "env": {"PADDED": "  x  "},
    }
    with gateway.client(timeout=120) as client:
        deployed = client.put(f"/v1/functions/{name}", json=spec)
        assert deployed.status_code == 201, deployed.text
        shown = client.get(f"/v1/functions/{name}").json()["spec"]
        assert shown["name"] == name
        assert shown["image"] == "worker:1"
        assert shown["command"][3:] == ["  two  ", " ", "\tthree\n"]
        assert shown["env"] == {"PADDED": "  x  "}
        done = client.post(f"/v1/functions/{name}/invocations?wait=60", json={})
        assert done.status_code == 200, done.text
        assert done.json()["result"] == {"argv": ["  two  ", " ", "\tthree\n"], "env": "  x  "}
