"""Background jobs an operator starts and watches (policy replay, tuning):
one at a time, with progress, cancellable, kept in memory after they end
(the last few) so the page can show the report."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..clock import Clock, utcnow
from ..errors import AdminError
from ..i18n import msg
from ..logs import log

KEPT = 10  # finished jobs kept for GET


class JobCancelled(Exception):
    """Raised inside a job at its next step after a cancel."""


@dataclass
class Job:
    id: str
    kind: str
    started_at: datetime
    status: str = "running"  # running | done | failed | cancelled
    done: int = 0
    total: int = 0
    stage: str = ""
    report: dict[str, Any] | None = None
    error: str | None = None
    finished_at: datetime | None = None
    cancel_requested: bool = False
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    def step(self, done: int, total: int, stage: str = "") -> None:
        """Progress; raises JobCancelled once a cancel was asked."""
        if self.cancel_requested:
            raise JobCancelled
        self.done, self.total = done, total
        if stage:
            self.stage = stage

    def as_dict(self) -> dict[str, Any]:
        share = self.done / self.total if self.total else (1.0 if self.status == "done" else 0.0)
        return {"job_id": self.id, "kind": self.kind, "status": self.status,
                "progress": {"done": self.done, "total": self.total, "share": round(share, 4), "stage": self.stage},
                "started_at": self.started_at.isoformat(),
                "finished_at": self.finished_at.isoformat() if self.finished_at else None,
                "report": self.report, "error": self.error}


class Jobs:
    def __init__(self, clock: Clock = utcnow) -> None:
        self._clock = clock
        self._jobs: dict[str, Job] = {}

    def running(self) -> Job | None:
        return next((j for j in self._jobs.values() if j.status == "running"), None)

    def start(self, kind: str, run: Callable[[Job], Awaitable[dict[str, Any]]]) -> Job:
        busy = self.running()
        if busy is not None:
            raise AdminError(msg("api.job_busy", kind=busy.kind, job_id=busy.id), 409)
        job = Job(uuid.uuid4().hex[:12], kind, self._clock())
        self._jobs[job.id] = job
        job.task = asyncio.create_task(self._run(job, run), name=f"ltm-{kind}-{job.id}")
        self._forget_old()
        return job

    async def _run(self, job: Job, run: Callable[[Job], Awaitable[dict[str, Any]]]) -> None:
        try:
            job.report = await run(job)
            job.status = "done"
        except (JobCancelled, asyncio.CancelledError):
            job.status = "cancelled"
        except Exception as exc:  # a job never takes the plugin down; the page shows why
            log.exception("ltm: %s job %s failed", job.kind, job.id)
            job.status, job.error = "failed", f"{type(exc).__name__}: {exc}"[:500]
        finally:
            job.finished_at = self._clock()

    def get(self, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise AdminError(msg("api.no_job", job_id=repr(job_id[:40])), 404)
        return job

    def cancel(self, job_id: str) -> Job:
        job = self.get(job_id)
        if job.status == "running":
            job.cancel_requested = True
        return job

    def _forget_old(self) -> None:
        ended = [j for j in self._jobs.values() if j.status != "running"]
        for job in ended[:-KEPT] if len(ended) > KEPT else []:
            del self._jobs[job.id]

    async def stop(self) -> None:
        tasks = [j.task for j in self._jobs.values() if j.task is not None and not j.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for job in self._jobs.values():  # a task cancelled before its first step never ran _run
            if job.status == "running":
                job.status, job.finished_at = "cancelled", self._clock()
