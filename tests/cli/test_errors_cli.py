"""What `eops` says when it cannot do what was asked: no gateway, no token, a wrong token; and
`--help` on every command of the client side."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from elasticityops.cli.main import app
from elasticityops.client import Client
from elasticityops.wire import MAX_PAGE_SIZE

from .runner import Eops, Writer


def test_connection_refused_names_the_url_and_how_to_start_the_server(server_less_process: Eops) -> None:
    server_less = server_less_process  # a real process: its one line, and no traceback, at exit
    result = server_less("fn", "ls")
    assert result.code == 1
    url = server_less.extra["EOPS_URL"]
    assert result.stderr.startswith(
        f"error: cannot reach the ElasticityOps gateway at {url} (connection refused)"
    )
    assert "eops serve" in result.stderr
    assert "EOPS_URL" in result.stderr
    assert "Traceback" not in result.output


def test_missing_token_says_how_to_get_one(eops: Eops) -> None:
    result = eops("ls", drop=("EOPS_TOKEN",))
    assert result.code == 1
    assert "EOPS_TOKEN is not set" in result.stderr
    assert "eops token create" in result.stderr
    assert "Traceback" not in result.output


def test_wrong_token_is_reported_as_refused(eops: Eops) -> None:
    result = eops("fn", "ls", env={"EOPS_TOKEN": "eops_not-a-real-token"})
    assert result.code == 1
    assert "the token in EOPS_TOKEN was refused" in result.stderr


def test_unknown_state_is_a_usage_error(server_less: Eops) -> None:
    result = server_less("ls", "--state", "sleeping")
    assert result.code == 2
    assert "'sleeping' is not one of" in result.stderr


@pytest.mark.parametrize(
    ("command", "says"),
    [
        pytest.param(("fn",), "deploy", id="fn"),
        pytest.param(("fn", "deploy"), "validated here first", id="fn-deploy"),
        pytest.param(("fn", "ls"), "List the deployed functions", id="fn-ls"),
        pytest.param(("fn", "get"), "its spec as YAML", id="fn-get"),
        pytest.param(("fn", "rm"), "--force", id="fn-rm"),
        pytest.param(("invoke",), "--idempotency-key", id="invoke"),
        pytest.param(("status",), "where its time went", id="status"),
        pytest.param(("logs",), "--follow", id="logs"),
        pytest.param(("cancel",), "process group", id="cancel"),
        pytest.param(("ls",), "--cursor", id="ls"),
    ],
)
def test_every_command_has_help(command: tuple[str, ...], says: str) -> None:
    # In-process: help text needs no gateway, and thirty subprocess starts would only add time.
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert says in result.output


def _no_traceback(result: object) -> None:
    output = result.output  # type: ignore[attr-defined]
    assert "Traceback" not in output, output
    assert "Error" not in output.replace("error:", ""), output  # no exception class names


def test_a_utf8_idempotency_key_is_sent_as_sent(eops: Eops, api: Client, write: Writer) -> None:
    api.deploy_function(write("key.json", '{"name": "cli-key", "command": ["python", "-c", "pass"]}'))
    first = eops("invoke", "cli-key", "-k", "ключ")
    again = eops("invoke", "cli-key", "-k", "ключ")
    assert first.code == 0, first.output
    inv_id = first.stdout.strip()
    assert again.stdout.strip() == inv_id, "the same key finds the same invocation"
    assert api.get_invocation(inv_id).idempotency_key == "ключ"


@pytest.mark.parametrize(
    ("args", "env", "field"),
    [
        (("invoke", "hello", "-k", "a\nb"), {}, "idempotency key"),
        (("fn", "ls"), {"EOPS_TOKEN": "a\nb"}, "EOPS_TOKEN"),
        (("fn", "ls"), {"EOPS_TOKEN": "tökén"}, "EOPS_TOKEN"),
        (("fn", "ls"), {"EOPS_URL": "http://[::1"}, "EOPS_URL"),
        (("fn", "ls"), {"EOPS_URL": "ftp://example"}, "EOPS_URL"),
    ],
    ids=["newline-key", "newline-token", "non-ascii-token", "broken-url", "not-http"],
)
def test_what_cannot_be_sent_is_bad_input_naming_it(
    server_less: Eops, args: tuple[str, ...], env: dict[str, str], field: str
) -> None:
    result = server_less(*args, env=env)
    assert result.code == 2, result.output
    assert f"  {field}: " in result.stderr, result.stderr
    assert "cannot reach" not in result.stderr
    _no_traceback(result)


def test_deploying_a_binary_file_says_it_is_not_a_spec(server_less: Eops, tmp_path: Path) -> None:
    binary = tmp_path / "python3"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    result = server_less("fn", "deploy", str(binary))
    assert result.code == 2, result.output
    assert "is not UTF-8 text" in result.stderr
    _no_traceback(result)


def test_a_deeply_nested_spec_file_is_refused_without_a_traceback(server_less: Eops, write: Writer) -> None:
    path = write("deep.yaml", "name: deep\ncommand: [python]\nenv: " + "[" * 5000 + "]" * 5000 + "\n")
    result = server_less("fn", "deploy", str(path))
    assert result.code == 2, result.output
    assert "nested deeper than" in result.stderr
    _no_traceback(result)


class _NotAGateway(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!DOCTYPE html><html><body><h1>Welcome to nginx!</h1></body></html>"
        self.send_response(200 if self.path == "/" else 404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def not_a_gateway() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotAGateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_that_is_not_a_gateway_is_named_not_printed(server_less: Eops, not_a_gateway: str) -> None:
    result = server_less("fn", "ls", env={"EOPS_URL": not_a_gateway})
    assert result.code == 1, result.output
    assert "is not an ElasticityOps gateway" in result.stderr
    assert "<html" not in result.output.lower()
    _no_traceback(result)


def test_ls_limit_is_the_servers_page_size(server_less: Eops) -> None:
    result = server_less("ls", "--limit", str(MAX_PAGE_SIZE + 1))
    assert result.code == 2, result.output
    assert "--limit" in result.stderr
    assert "cannot reach" not in result.stderr, "refused by the CLI, before the server"


def test_token_create_refuses_a_data_dir_without_a_database(tmp_path: Path) -> None:
    typo = tmp_path / "typo"
    # In-process: tests/api/test_tokens.py runs `eops token` as a real process.
    token = Eops(None, in_process=True)
    result = token("token", "create", "--data-dir", str(typo))
    assert result.code == 2, result.output
    assert f"there is no database at {typo / 'eops.db'}" in result.stderr
    assert not typo.exists(), "nothing was made"
    made = token("token", "create", "--data-dir", str(typo), "--create")
    assert made.code == 0, made.output
    assert made.stdout.startswith("eops_")
    again = token("token", "create", "--data-dir", str(typo))
    assert again.code == 0, again.output


def test_a_bug_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from elasticityops.cli import main

    def broken() -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(main, "app", broken)
    monkeypatch.delenv("EOPS_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exited:
        main.main()
    assert exited.value.code == 1
    assert capsys.readouterr().err == (
        "error: eops hit a bug (RuntimeError: boom); run it again with EOPS_DEBUG=1 for the "
        "traceback, and please report it\n"
    )
    monkeypatch.setenv("EOPS_DEBUG", "1")
    with pytest.raises(RuntimeError):
        main.main()
