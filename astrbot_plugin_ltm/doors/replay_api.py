"""The dashboard API of policy replay, tuning and the holdout set (doors/api.py
hands these routes here). A candidate policy is validated exactly as ``PUT
policy`` validates a change. Nothing here writes but a holdout draw.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime
from typing import Any

from .. import validators as v
from ..clock import as_utc
from ..config import LTMConfig, policy_of
from ..engine import LTMEngine
from ..errors import AdminError
from ..i18n import msg
from ..operating.holdout import Holdout, parse_rule, parse_scopes
from ..operating.jobs import Job
from ..operating.policy_change import CANDIDATE, policy_change
from ..operating.replay import Selection, compare, load
from ..operating.tuning import TUNE_READS, tune
from ..storing.database import ReadOnlyError

SETS = ("holdout", "fitting", "all")


def candidate_config(raw_config: dict[str, Any], policy: Any) -> LTMConfig:
    """The saved settings with ``policy`` (a PUT policy body) applied, or a
    clear refusal."""
    if not isinstance(policy, dict) or not policy:
        raise AdminError(msg("api.send_candidate"))
    v.json_depth(policy)
    _, cfg = policy_change(raw_config, policy, CANDIDATE)
    return cfg


def _since(raw: Any) -> datetime | None:
    if raw in (None, ""):
        return None
    if not isinstance(raw, str) or len(raw) > 40:
        raise AdminError(msg("api.since"))
    try:
        return as_utc(datetime.fromisoformat(raw.replace("Z", "+00:00")))
    except ValueError:
        raise AdminError(msg("api.since")) from None


class ReplayAPI:
    def __init__(self, engine: LTMEngine, raw_config: Callable[[], dict[str, Any]]) -> None:
        self.engine = engine
        self._raw_config = raw_config
        self.holdout = Holdout(engine.db, engine.clock)

    async def _holdout_sessions(self) -> tuple[str, ...]:
        found = await self.holdout.current()
        if found.drawn_at is None:
            if self.engine.config.emergency_read_only:
                raise AdminError(msg("api.holdout_read_only"), 409)
            found = await self.holdout.ensure()
        return tuple(found.sessions)

    def _reader(self) -> Any:
        if self.engine.reader is None:
            raise AdminError(msg("api.starting"), 503)
        return self.engine.reader

    async def start_replay(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise AdminError(msg("api.send_replay"))
        unknown = set(body) - {"policy", "scopes", "since", "set"}
        if unknown:
            raise AdminError(msg("api.unknown_fields_known", fields=", ".join(sorted(unknown))[:200],
                                 known="policy, scopes, since, set"))
        candidate = candidate_config(self._raw_config(), body.get("policy"))
        chosen = v.choice(body.get("set") or "holdout", "set", SETS)
        scopes, since = parse_scopes(body.get("scopes")), _since(body.get("since"))
        reader = self._reader()
        current = copy.deepcopy(self.engine.config)  # the policy when the replay started
        sessions = await self._holdout_sessions() if chosen != "all" else ()
        selection = Selection(chosen, sessions, scopes, since)

        async def run(job: Job) -> dict[str, Any]:
            job.step(0, 0, "loading")
            data = await load(self.engine.db, selection, resolver=self.engine.resolver)
            job.step(0, 0, "replaying")
            report = await compare(reader, self.engine.clock, data, current, candidate,
                                   lambda done, total: job.step(done, total))
            return {"selection": selection.as_dict(), "current_policy": policy_of(current),
                    "candidate_policy": policy_of(candidate), **report}

        return {"job_id": self.engine.jobs.start("replay", run).id}

    async def job(self, job_id: str) -> dict[str, Any]:
        return self.engine.jobs.get(v.text(job_id, "job_id", 64)).as_dict()

    async def cancel(self, job_id: str) -> dict[str, Any]:
        return self.engine.jobs.cancel(v.text(job_id, "job_id", 64)).as_dict()

    async def start_tune(self, body: Any) -> dict[str, Any]:
        body = {} if body is None else body
        if not isinstance(body, dict):
            raise AdminError(msg("api.send_tune"))
        unknown = set(body) - {"scopes", "since"}
        if unknown:
            raise AdminError(msg("api.unknown_fields_known", fields=", ".join(sorted(unknown))[:200],
                                 known="scopes, since"))
        scopes, since = parse_scopes(body.get("scopes")), _since(body.get("since"))
        reader = self._reader()
        current = copy.deepcopy(self.engine.config)
        sessions = await self._holdout_sessions()

        async def run(job: Job) -> dict[str, Any]:
            job.step(0, 0, "loading")
            resolver = self.engine.resolver
            fitting = await load(self.engine.db, Selection("fitting", sessions, scopes, since), TUNE_READS, TUNE_READS,
                                 resolver)
            held = await load(self.engine.db, Selection("holdout", sessions, scopes, since), TUNE_READS, TUNE_READS,
                              resolver)
            job.step(0, 0, "tuning")
            report = await tune(reader, self.engine.clock, fitting, held, current,
                                lambda done, total: job.step(done, total))
            return {"current_policy": policy_of(current), **report}

        return {"job_id": self.engine.jobs.start("tune", run).id}

    async def get_holdout(self) -> dict[str, Any]:
        return (await self.holdout.current()).as_dict()

    async def draw_holdout(self, body: Any) -> dict[str, Any]:
        rule = parse_rule(body if body not in ({}, None) else None)
        if self.engine.config.emergency_read_only:
            raise ReadOnlyError(str(msg("api.holdout_store_read_only")))
        return (await self.holdout.draw(rule)).as_dict()
