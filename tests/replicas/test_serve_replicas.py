"""Real `eops serve` processes as replicas: each locks only its own data dir (SQLite is the one
database a lock guards; PostgreSQL is shared by design), so two with their own data dirs start
on one PostgreSQL, together, and serve the same functions; a second on the same data dir is
still refused."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from helpers.server import EOPS, HOST, RunningServer, base_env, free_port, start_server


def test_two_gateways_with_their_own_data_dirs_start_together_on_one_postgresql(
    tmp_path: Path, database_url: str
) -> None:
    env = {"EOPS_DATABASE_URL": database_url}
    started: list[RunningServer] = []
    try:
        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(start_server, tmp_path / name, env=env) for name in ("a", "b")]
            errors = []
            for future in futures:
                try:
                    started.append(future.result())
                except Exception as exc:
                    errors.append(exc)
            assert not errors, errors
        a, b = started
        with a.client() as http_a, b.client() as http_b:
            body = b'{"name": "hello", "command": ["python", "-c", "pass"]}'
            assert http_a.put("/v1/functions/hello", content=body).status_code == 201
            assert [f["spec"]["name"] for f in http_b.get("/v1/functions").json()["items"]] == ["hello"]
            # Each replica's admin token is in the one database: either replica takes it.
            assert http_b.get("/v1/functions", headers=a.auth).status_code == 200
        same_dir = subprocess.run(
            [EOPS, "serve", "--host", HOST, "--port", str(free_port()), "--data-dir", str(a.data_dir)],
            env=base_env(env),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert same_dir.returncode == 1
        assert "another gateway" in same_dir.stderr
        assert f"PID {a.pid}" in same_dir.stderr
    finally:
        for server in started:
            server.stop()
