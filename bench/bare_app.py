"""The framework's ceiling: a FastAPI endpoint that only answers 202, served like `eops serve`
(uvicorn, one process, no access log). Run: python bench/bare_app.py PORT"""

from __future__ import annotations

import sys

import uvicorn
from fastapi import FastAPI, Response

app = FastAPI()


@app.post("/v1/functions/noop/invocations", status_code=202)
async def accept() -> Response:
    return Response(
        content=b'{"id":"inv-bare","state":"queued"}', status_code=202, media_type="application/json"
    )


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
