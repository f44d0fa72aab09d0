"""Changes to accepted invocations in SQL, each a compare-and-set on the row as it stands
(compare_and_set.py): transitions, moves to another GPU type, the preemption intent, backend
events and results the jobs post. The transition observers hear of each committed one."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import Connection, select, update

from elasticityops.domain.errors import NotFound
from elasticityops.domain.events import BackendEvent
from elasticityops.domain.invocations import ACTIVE_STATES, Invocation, Note, State
from elasticityops.domain.ports import Change
from elasticityops.domain.spillover import Spill, moved
from elasticityops.store import rows
from elasticityops.store.compare_and_set import fold_many, preempting_many
from elasticityops.store.database import Database, TransitionObserver
from elasticityops.store.tables import invocations

log = logging.getLogger(__name__)


class SqlTransitions(Database):
    """The TransitionStore of the port (domain/ports/store.py)."""

    def observe_transitions(self, observer: TransitionObserver) -> None:
        self._observers.append(observer)

    async def apply(self, change: Change) -> Invocation | None:
        # Batched with the other transitions queued meanwhile: a burst's admissions read their
        # rows with one SELECT per batch instead of one each (see compare_and_set.apply_many).
        outcome: tuple[State, Invocation] | None = await self._writer.run_batched(self._apply_many, change)
        if outcome is None:
            return None
        self._notify(*outcome)
        return outcome[1]

    def _notify(self, previous: State, after: Invocation) -> None:
        for observer in self._observers:
            try:
                observer(previous, after)
            except Exception:
                log.exception("transition observer failed")

    async def mark_preempting(self, invocation_id: str, by: str, note: Note) -> Invocation | None:
        outcome: tuple[State, Invocation] | None = await self._writer.run_batched(
            preempting_many, (invocation_id, by, note)
        )
        return None if outcome is None else outcome[1]

    async def record(self, event: BackendEvent) -> tuple[State, Invocation] | None:
        # Batched like transitions: a burst's watch events share a SELECT and UPDATE statements
        # with the other writes queued meanwhile (see compare_and_set.record_many).
        outcome: tuple[State, Invocation] | None = await self._writer.run_batched(self._record_many, event)
        if outcome is not None and outcome[0] is not outcome[1].state:
            self._notify(*outcome)
        return outcome

    async def spill(self, invocation_id: str, current: str, spill: Spill, at: datetime) -> Invocation | None:
        def run(conn: Connection) -> tuple[State, Invocation] | None:
            def step(before: Invocation, _: None) -> Invocation | None:
                return moved(before, current, spill, at)

            return fold_many(conn, [(invocation_id, None)], step)[0]

        outcome: tuple[State, Invocation] | None = await self._write(run)
        return None if outcome is None else outcome[1]

    async def set_result(self, invocation_id: str, result: bytes) -> State | None:
        def run(conn: Connection) -> State | None:
            # Compare-and-set: only while the job can still be running; an ended invocation's
            # result is final (a late or replayed callback changes nothing).
            stored = conn.execute(
                update(invocations)
                .where(
                    invocations.c.id == invocation_id,
                    invocations.c.state.in_([s.value for s in ACTIVE_STATES]),
                )
                .values(result=result, result_head=rows.result_head(result))
            )
            if stored.rowcount:
                return None
            query = select(invocations.c.state).where(invocations.c.id == invocation_id)
            state = conn.execute(query).scalar()
            if state is None:
                raise NotFound(f"no invocation {invocation_id!r}")
            return State(state)

        refused: State | None = await self._write(run)
        return refused
