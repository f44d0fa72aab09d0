"""A stand-in gateway for the adoption test: launches jobs with a LocalBackend, prints their
ids, then waits to be killed with SIGKILL (as a real gateway might be).

    python gateway_stand_in.py RUN_DIR RECORD_FILE LONG_SECONDS"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from elasticityops.backends.local.backend import LocalBackend
from elasticityops.backends.local.settings import LocalBackendSettings
from elasticityops.domain.events import BackendEvent

sys.path.insert(0, str(Path(__file__).parents[2]))  # tests/, as pytest has it
from backends.local.support import request, spec


async def main(run_dir: Path, record: str, long_s: float) -> None:
    backend = LocalBackend(LocalBackendSettings(run_dir=run_dir, gpus=3, virtual=True))

    async def ignore(event: BackendEvent) -> None:
        pass

    await backend.start(ignore)
    fn = spec()
    long_jobs = [request(fn, {"sleep": long_s, "record": record}) for _ in range(2)]
    quick = request(fn, {"record": record})
    for req in [*long_jobs, quick]:
        await backend.launch(req)
    print(
        json.dumps({"long": [r.invocation.id for r in long_jobs], "quick": quick.invocation.id}), flush=True
    )
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])))
