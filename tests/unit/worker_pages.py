"""Reading a worker's web pages in process (the ``worker_web`` fixture is in conftest)."""

from __future__ import annotations


async def get(client, path: str) -> tuple[int, dict]:
    response = await client.get(path)
    return response.status, await response.json()


async def ready_gauge(client) -> float:
    text = await (await client.get("/metrics")).text()
    (line,) = [s for s in text.splitlines() if s.startswith("stream_dp_ready ")]
    return float(line.split()[1])
