from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Async tests here run on asyncio (the gateway's loop), through anyio's pytest plugin."""
    return "asyncio"
