"""The store's knobs (`eops serve` flags and EOPS_* variables, elasticityops/knobs.py); SqlStore
takes its defaults from here."""

from __future__ import annotations

from dataclasses import dataclass

from elasticityops.knobs import knob


@dataclass(frozen=True)
class StoreSettings:
    """The store's knobs; SqlStore's constructor takes its defaults from here."""

    url: str = knob(
        "",
        env="EOPS_DATABASE_URL",
        unit="URL",
        shown="SQLite file eops.db in the data dir",
        help="SQLAlchemy URL of the database, e.g. postgresql+psycopg://user:pass@host/db.",
    )
    group_commit_max: int = knob(
        512,
        env="EOPS_GROUP_COMMIT_MAX",
        unit="writes",
        ge=1,
        le=100_000,
        help="Most writes in one transaction.",
    )
    # Each read is mostly Python work under the GIL, so more threads mainly contend with the event
    # loop: in a 1,000-invocation burst one thread gave 176 Jobs/s and 9.9 gateway CPU-s against
    # ~145 Jobs/s and 10.6-12 CPU-s with four (bench/k8s_burst.py).
    read_threads: int = knob(
        1, env="EOPS_STORE_READ_THREADS", unit="threads", ge=1, le=256, help="Threads serving database reads."
    )
