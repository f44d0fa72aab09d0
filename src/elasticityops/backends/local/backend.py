"""The local backend: every invocation a real process on this machine, on GPU slots of its own.

Each job runs under a small supervisor process (see supervisor.py) in a session of its own, and
everything about it lives in its run directory (see rundir.py). The backend only starts
supervisors and watches run directories, so a gateway killed with SIGKILL loses nothing: the
jobs run on, and the next gateway adopts them from their run directories. Creating the run
directory is the launch's idempotency marker, so no job is ever started twice."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from elasticityops.backends.local import lost, rundir, safefile
from elasticityops.backends.local.gpus import SlotDevice, detect_gpus, plan_slots, visible_gpus
from elasticityops.backends.local.jobenv import job_env, resolve_argv, slot_node
from elasticityops.backends.local.outcome import outcome_of, stamp
from elasticityops.backends.local.rundir import RunState, classify
from elasticityops.backends.local.settings import LocalBackendSettings
from elasticityops.backends.local.slots import SlotPool, SlotView
from elasticityops.backends.local.supervisor import MODULE as SUPERVISOR_MODULE
from elasticityops.domain.clock import Clock, SystemClock
from elasticityops.domain.events import BackendEvent, Finished, finished_event, note_event
from elasticityops.domain.invocations import FailureReason, Invocation
from elasticityops.domain.ports import EventSink, LaunchRequest
from elasticityops.domain.queue import QueueStatus

log = logging.getLogger(__name__)

_LOG_CHUNK = 64 * 1024


@dataclass
class _Waiting:
    request: LaunchRequest
    gpus: int
    since: float  # wall-clock time of the launch: timeout_seconds counts from it


class LocalBackend:
    name = "local"

    def __init__(
        self,
        settings: LocalBackendSettings,
        clock: Clock | None = None,
        *,
        detected_gpus: list[tuple[int, str]] | None = None,
    ) -> None:
        """`detected_gpus`: what `nvidia-smi -L` would list; None: ask nvidia-smi."""
        self.settings = settings
        self.clock = clock or SystemClock()
        if detected_gpus is None:
            detected_gpus = []
            if not settings.virtual:
                detected_gpus, warning = visible_gpus(detect_gpus(), os.environ.get("CUDA_VISIBLE_DEVICES"))
                if warning:
                    log.warning(warning)
        self.devices = plan_slots(settings.gpus, settings.virtual, detected_gpus)
        if detected_gpus and self.devices[0].physical is None:
            log.warning(
                "%d GPU slots asked for but %d GPUs found: all slots are virtual (no GPU); "
                "ask for at most %d to run on the GPUs",
                len(self.devices),
                len(detected_gpus),
                len(detected_gpus),
            )
        self._pool = SlotPool(self.devices, settings.slot_idle_timeout_s, settings.slot_provision_delay_s)
        self._run_root = settings.run_dir
        self._workdir = str((settings.workdir or Path.cwd()).resolve())
        self._sink: EventSink | None = None
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._waiting: deque[_Waiting] = deque()
        self._launching: set[str] = set()

    # --- Backend protocol -------------------------------------------------------------------

    async def start(self, sink: EventSink) -> None:
        self._run_root.parent.mkdir(parents=True, exist_ok=True)
        safefile.make_private_dir(self._run_root, exist_ok=True)
        self._sink = sink

    async def stop(self) -> None:
        """Stop watching; the jobs and their supervisors run on (a restart adopts them)."""
        tasks = list(self._watchers.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._watchers.clear()
        self._sink = None

    def free_gpus(self) -> int:
        waiting = sum(w.gpus for w in self._waiting)
        return max(0, self._pool.free() - waiting)

    def queue_status(self, invocation: Invocation) -> QueueStatus | None:
        return None  # no queue but the gateway's

    def total_gpus(self) -> int:
        return self._pool.total

    def max_payload_bytes(self) -> int | None:
        return None  # a file in the run dir: the API's limit is the only one

    def keep_warm(self, slots: int) -> None:
        """Pin `slots` free slots warm (the headroom controller's units; see slots.py)."""
        self._pool.keep_warm(slots, self.clock.monotonic())

    def warm_picture(self) -> tuple[int, int, int, tuple[float, ...]]:
        return self._pool.warm_picture(self.clock.monotonic())

    def slots(self) -> list[SlotView]:
        """Who holds which slot and which are warm, for status pages and metrics."""
        return self._pool.view(self.clock.monotonic())

    async def launch(self, request: LaunchRequest) -> None:
        inv_id = _key(request.invocation)
        if inv_id in self._watchers or inv_id in self._launching:
            return
        if any(_key(w.request.invocation) == inv_id for w in self._waiting):
            return
        # Held for the whole launch, awaits included: a repeated launch meanwhile is a no-op.
        self._launching.add(inv_id)
        try:
            await self._launch(request)
        finally:
            self._launching.discard(inv_id)

    async def _launch(self, request: LaunchRequest) -> None:
        inv_id = _key(request.invocation)
        count = request.spec.gpu.count
        if count > self._pool.total:
            # Admission refuses these before launch; a relaunch after a restart with fewer
            # --gpus still meets one.
            await self._fail_launch(
                inv_id,
                f"gpu.count is {count} but this machine offers {self._pool.total} GPU slots; "
                "lower gpu.count or start the gateway with more --gpus",
            )
            return
        run_dir = self._run_root / inv_id
        state = await asyncio.to_thread(classify, run_dir)
        if state is RunState.unstarted:
            # A previous launch got as far as mkdir and died before its supervisor ran anything.
            shutil.rmtree(run_dir, ignore_errors=True)
        elif state is not RunState.absent:
            await self._attach(inv_id, run_dir, state)
            return
        taken = self._pool.take(inv_id, count, self.clock.monotonic())
        if taken is None:
            # Only after a restart (relaunching pending work) or a caller that ignores
            # free_gpus(): hold it here, in order, until slots free up.
            self._waiting.append(_Waiting(request, count, time.time()))
            busy = f"all {self._pool.total} GPU slots are busy"
            await self._emit(note_event(inv_id, self.clock.now(), "WaitingForSlot", busy))
            return
        devices, delay = taken
        await self._start_or_fail(request, run_dir, devices, delay, time.time())

    async def cancel(self, invocation: Invocation) -> None:
        """Ask the job's supervisor to stop it (SIGTERM to its process group, SIGKILL after
        kill_grace_s). Returns at once; the `finished` event follows when the group is gone."""
        key = _key(invocation)
        for waiting in list(self._waiting):
            if _key(waiting.request.invocation) == key:
                self._waiting.remove(waiting)
                await self._emit(finished_event(key, Finished.cancelled(self.clock.now())))
                return
        run_dir = self._run_root / key
        await asyncio.to_thread(_ask_to_cancel, run_dir)

    async def preempt(self, invocation: Invocation) -> None:
        """Stop this attempt's job as a cancel does (its end, reported as the old attempt's,
        records nothing: the dispatcher records the preemption), and drop it if it still waits
        for a slot here. The next attempt runs in a run directory of its own."""
        key = _key(invocation)
        for waiting in list(self._waiting):
            if _key(waiting.request.invocation) == key:
                self._waiting.remove(waiting)
                # Its end as the old attempt's: nothing in the store, but it tells the
                # dispatcher that the GPUs it was waiting for are not taken by it.
                gone = Finished.cancelled(self.clock.now(), "preempted while waiting for a slot")
                await self._emit(finished_event(key, gone))
                return
        await asyncio.to_thread(_ask_to_cancel, self._run_root / key)

    async def adopt(self, active: Sequence[Invocation]) -> list[str]:
        missing: list[str] = []
        for inv in active:
            key = _key(inv)
            if key in self._watchers or key in self._launching:
                continue
            run_dir = self._run_root / key
            self._launching.add(key)  # as a launch: one look at a time per invocation
            try:
                state = await asyncio.to_thread(classify, run_dir)
                if state in (RunState.absent, RunState.unstarted):
                    missing.append(inv.id)
                else:
                    await self._attach(key, run_dir, state)
            finally:
                self._launching.discard(key)
        return missing

    async def logs(
        self, invocation: Invocation, follow: bool, attempt: int | None = None
    ) -> AsyncIterator[bytes]:
        """The stdout and stderr so far of the job of `attempt` (None: the current one), each
        attempt's kept in its own run directory; with `follow`, then what it writes until it
        ends. Nothing for an attempt not launched (yet, or ever: preempted while it waited)."""
        wanted = invocation.attempt if attempt is None else attempt
        run_dir = self._run_root / rundir.run_key(invocation.id, wanted)
        if not await asyncio.to_thread(run_dir.is_dir):
            return
        position = 0
        while True:
            # exit.json looked at before reading: no tail is lost. Both off the event loop, and
            # the log read as any run-dir file is (safefile: no link, no FIFO, bounded).
            ended, chunk = await asyncio.to_thread(_log_look, run_dir, position)
            if chunk:
                position += len(chunk)
                yield chunk
                continue
            if not follow or ended:
                return
            await self.clock.sleep(self.settings.poll_interval_s)

    # --- internals --------------------------------------------------------------------------

    async def _emit(self, event: BackendEvent) -> None:
        """Events are made under the run key (which attempt ran); the sink hears the
        invocation's id and that attempt."""
        if self._sink is not None:
            inv_id, attempt = rundir.parse_run_key(event.invocation_id)
            await self._sink(replace(event, invocation_id=inv_id, attempt=attempt))

    async def _start_job(
        self, request: LaunchRequest, run_dir: Path, devices: list[SlotDevice], delay: float, since: float
    ) -> None:
        """`delay`: seconds before the slots are ready (a cold slot's provisioning)."""
        inv_id = _key(request.invocation)
        node = slot_node(devices)
        try:
            # Files and fork off the event loop: the gateway keeps answering meanwhile.
            spawned, proc = await asyncio.to_thread(
                self._spawn, request, run_dir, devices, node, delay, since
            )
        except BaseException:
            # Nothing started (a half-made run dir reads as unstarted and is redone on relaunch).
            self._pool.release(inv_id, self.clock.monotonic())
            raise
        if not spawned:
            self._pool.release(inv_id, self.clock.monotonic())
            return
        if delay > 0:
            warming = f"{node} is cold; provisioning it takes {delay:.3g}s"
            await self._emit(note_event(inv_id, self.clock.now(), "SlotWarming", warming, node=node))
        elif self.settings.slot_provision_delay_s > 0:  # warm only means something where cold is slow
            warm = f"landed on warm capacity: {node} was ready"
            await self._emit(note_event(inv_id, self.clock.now(), "WarmUnits", warm, node=node))
        self._watch(inv_id, run_dir, node, proc)

    def _spawn(
        self,
        request: LaunchRequest,
        run_dir: Path,
        devices: list[SlotDevice],
        node: str,
        delay: float,
        since: float,
    ) -> tuple[bool, subprocess.Popen[bytes] | None]:
        """Create the run dir (the idempotency marker), write what the job needs and set aside
        the room of its exit record (now, while there is room: see rundir.write_exit), start its
        supervisor. (False, None) when the run dir exists already."""
        inv_id = request.invocation.id
        try:
            safefile.make_private_dir(run_dir)
        except FileExistsError:
            return False, None
        try:
            rundir.write_bytes_atomic(run_dir / rundir.PAYLOAD, request.payload)
            env = job_env(
                os.environ,
                request.spec.env,
                invocation_id=inv_id,
                payload_path=str(run_dir / rundir.PAYLOAD),
                result_path=str(run_dir / rundir.RESULT),
                callback_url=request.callback_url,
                callback_token=request.callback_token,
                slots=devices,
            )
            rundir.write_json_atomic(
                run_dir / rundir.LAUNCH,
                {
                    "argv": resolve_argv(request.spec.command, sys.executable),
                    "env": env,
                    "cwd": request.spec.workdir or self._workdir,
                    "timeout_s": request.spec.timeout_seconds,
                    "launched_at": since,  # timeout_seconds counts from here, the slot's wait included
                    "max_log_bytes": self.settings.max_log_bytes,
                    "cgroups": self.settings.cgroups,
                    "kill_grace_s": self.settings.kill_grace_s,
                    "provision_delay_s": delay,
                    "poll_interval_s": self.settings.poll_interval_s,
                    "slots": [d.index for d in devices],
                    "node": node,
                },
            )
            rundir.reserve_exit_room(run_dir)
        except OSError:
            # Nothing runs (a full disk, say): what was written goes, so it takes no room.
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
        # Locked before the supervisor exists and handed down to it: from here on a live
        # supervisor (or this launch) holds the lock, so a new gateway never mistakes a starting
        # job for an unstarted one.
        lock_fd = rundir.acquire_lock(run_dir)
        if lock_fd is None:
            raise OSError(f"run directory {run_dir} is locked by another process")
        try:
            with open(safefile.open_append(run_dir / rundir.SUPERVISOR_LOG), "ab") as sup_log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", SUPERVISOR_MODULE, str(run_dir), "--lock-fd", str(lock_fd)],
                    pass_fds=(lock_fd,),
                    start_new_session=True,
                    stdin=subprocess.DEVNULL,
                    stdout=sup_log,
                    stderr=subprocess.STDOUT,
                    cwd=run_dir,
                )
        except OSError as exc:
            rundir.write_exit(run_dir, {"launch_error": f"could not start the job's supervisor: {exc}"})
            return True, None
        finally:
            os.close(lock_fd)
        return True, proc

    async def _attach(self, inv_id: str, run_dir: Path, state: RunState) -> None:
        """Watch a job this object did not start (a restart, or a repeated launch)."""
        launch = await asyncio.to_thread(rundir.read_json, run_dir / rundir.LAUNCH) or {}
        node = launch.get("node") if isinstance(launch.get("node"), str) else None
        if state is not RunState.done:
            indices = [i for i in launch.get("slots", []) if isinstance(i, int)]
            # A slot held by an adopted job stays taken until the job ends.
            if self._pool.claim(inv_id, indices) is None:
                log.warning("adopted %s holds slots %s that this gateway does not offer", inv_id, indices)
        self._watch(inv_id, run_dir, node, None)

    def _watch(
        self, inv_id: str, run_dir: Path, node: str | None, proc: subprocess.Popen[bytes] | None
    ) -> None:
        task = asyncio.create_task(self._follow(inv_id, run_dir, node, proc), name=f"watch-{inv_id}")
        self._watchers[inv_id] = task

    async def _follow(
        self, inv_id: str, run_dir: Path, node: str | None, proc: subprocess.Popen[bytes] | None
    ) -> None:
        """Watch a job to its end and report it. Nothing makes a watch end with its job
        unreported: a look the disk fails (full, failing) is made again at the next poll, and
        anything else (a bug) stops the job and reports it `lost`. Either way its slots go back
        and the launches waiting for them go on."""
        try:
            await self._report_to_end(inv_id, run_dir, node, proc)
        except Exception as exc:
            log.exception("watching %s failed; its job is stopped and reported lost", inv_id)
            with contextlib.suppress(OSError):
                await asyncio.to_thread(lost.stop_unwatched, run_dir, proc)
            self._pool.release(inv_id, self.clock.monotonic())
            message = f"the gateway's watch of the job failed ({exc!r}), so the job was stopped"
            ended = Finished.failed(self.clock.now(), FailureReason.lost, message)
            await self._emit(finished_event(inv_id, ended))
        finally:
            # Whatever became of the bookkeeping (a second release frees nothing).
            self._pool.release(inv_id, self.clock.monotonic())
            if self._watchers.get(inv_id) is asyncio.current_task():
                del self._watchers[inv_id]
        await self._start_waiting()

    async def _report_to_end(
        self, inv_id: str, run_dir: Path, node: str | None, proc: subprocess.Popen[bytes] | None
    ) -> None:
        told = BackendEvent(inv_id, node=node)  # what has been reported so far
        refused = 0  # looks in a row that the disk failed
        while True:
            # Every look at the run dir is off the event loop (disk reads, and the files are
            # the job's to tamper with: see safefile).
            try:
                seen, record = await asyncio.to_thread(self._look, run_dir, proc, told)
                refused = 0
            except OSError as exc:
                refused += 1
                if refused == 1 or refused % 100 == 0:
                    log.warning("looking at %s failed (%d times in a row): %s", run_dir, refused, exc)
                seen, record = told, None
            if record is not None:
                break
            if seen != told:
                await self._emit(_news(told, seen))
                told = seen
            await self.clock.sleep(self.settings.poll_interval_s)
        result, problem = await asyncio.to_thread(
            _read_result, run_dir / rundir.RESULT, self.settings.max_result_bytes
        )
        at = stamp(record, self.clock.now())
        seen = replace(seen, finished=outcome_of(record, at=at, result=result, result_problem=problem))
        # Free the slots before telling anyone, so the dispatcher sees the capacity (less
        # what jobs held here in `_waiting` need: free_gpus() counts them).
        self._pool.release(inv_id, self.clock.monotonic())
        self._watchers.pop(inv_id, None)
        await self._emit(_news(told, seen))

    def _look(
        self, run_dir: Path, proc: subprocess.Popen[bytes] | None, told: BackendEvent
    ) -> tuple[BackendEvent, dict[str, Any] | None]:
        """One look at the run dir (blocking: run in a thread): `told` plus what is new, and the
        exit record once the job has ended. exit.json is believed only once its supervisor is
        gone (it writes the record, then lets go of its lock): the job, running as the same
        user, could write one itself while it still runs."""
        record = None
        if not self._supervisor_alive(run_dir, proc):
            record = rundir.read_json(run_dir / rundir.EXIT) or lost.record_lost(run_dir)
        # Whatever this look found goes out as one event (a short job's capacity, start and end
        # seen at once are one store write).
        seen = told
        if seen.capacity_ready is None:
            capacity = rundir.read_json(run_dir / rundir.CAPACITY)
            if capacity is not None:
                seen = replace(seen, capacity_ready=stamp(capacity, self.clock.now()))
        if seen.started is None:
            started = rundir.read_json(run_dir / rundir.STARTED)
            if started is not None:
                seen = replace(seen, started=stamp(started, self.clock.now()))
        return seen, record

    def _supervisor_alive(self, run_dir: Path, proc: subprocess.Popen[bytes] | None) -> bool:
        if proc is not None:
            return proc.poll() is None  # our own child: poll() also reaps it
        return rundir.supervisor_alive(run_dir)

    async def _start_waiting(self) -> None:
        while self._waiting:
            head = self._waiting[0]
            taken = self._pool.take(_key(head.request.invocation), head.gpus, self.clock.monotonic())
            if taken is None:
                return  # strict order: the head waits for enough slots
            self._waiting.popleft()
            devices, delay = taken
            inv_id = _key(head.request.invocation)
            self._launching.add(inv_id)
            try:
                await self._start_or_fail(head.request, self._run_root / inv_id, devices, delay, head.since)
            finally:
                self._launching.discard(inv_id)

    async def _start_or_fail(
        self, request: LaunchRequest, run_dir: Path, devices: list[SlotDevice], delay: float, since: float
    ) -> None:
        """Start the job; a failure to start is reported as its end, like every other."""
        try:
            await self._start_job(request, run_dir, devices, delay, since)
        except Exception as exc:
            log.warning("starting %s failed: %s", request.invocation.id, exc)
            await self._fail_launch(_key(request.invocation), f"could not launch: {exc}")

    async def _fail_launch(self, invocation_id: str, message: str) -> None:
        failed = Finished.failed(self.clock.now(), FailureReason.launch_error, message)
        await self._emit(finished_event(invocation_id, failed))


def _key(invocation: Invocation) -> str:
    """What this backend keeps an attempt's job under: its run directory's name."""
    return rundir.run_key(invocation.id, invocation.attempt)


def _news(told: BackendEvent, seen: BackendEvent) -> BackendEvent:
    """`seen` less the milestones `told` has reported already."""
    return replace(
        seen,
        capacity_ready=None if told.capacity_ready else seen.capacity_ready,
        started=None if told.started else seen.started,
    )


def _ask_to_cancel(run_dir: Path) -> None:
    if run_dir.is_dir():
        safefile.touch(run_dir / rundir.CANCEL)


def _log_look(run_dir: Path, position: int) -> tuple[bool, bytes]:
    """Whether the job has ended (looked at first), and the log from `position` on."""
    ended = safefile.exists(run_dir / rundir.EXIT)
    return ended, _read_from(run_dir / rundir.LOG, position)


def _read_from(path: Path, position: int) -> bytes:
    return safefile.read_chunk(path, position, _LOG_CHUNK)


def _read_result(path: Path, limit: int) -> tuple[bytes | None, str]:
    """The result file, bounded by `limit` while it is read, and what was wrong with it."""
    try:
        got = safefile.read_bounded(path, limit)
    except FileNotFoundError:
        return None, ""
    except safefile.UnsafeFile as exc:
        return None, (
            f"the result file was ignored: {exc.strerror}; write a regular file at $EOPS_RESULT_PATH"
        )
    except OSError as exc:
        return None, f"the result file could not be read: {exc.strerror or exc}"
    if got.over:
        return None, f"result file is over the {limit}-byte limit; it was dropped"
    return got.data, ""
