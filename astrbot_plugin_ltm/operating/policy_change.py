"""One validator for a policy change, wherever one comes in. Each door keeps
its own words (a Refusals), so every message and status code stays what it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config import POLICY_KEYS, LTMConfig, parse_config, refusal_message, with_policy
from ..errors import AdminError
from ..i18n import msg
from ..validators import shown


@dataclass(frozen=True)
class Refusals:
    """The catalogue codes a door refuses a change with."""

    unknown: str  # {names} the keys that are no policy setting, {keys} those that are
    invalid: str  # {problems} parse_config's, as a refusal
    # A request's keys are cut short in the message (validators.shown);
    # a stored version's are shown as they are.
    cut_names: bool = True


PUT_POLICY = Refusals("api.policy_unknown", "api.invalid_settings")
CANDIDATE = Refusals("api.candidate_keys", "api.candidate_invalid")
STORED = Refusals("api.not_policy", "api.invalid_settings", cut_names=False)  # a rollback's, a pause's


def refuse_unknown_keys(changes: Mapping[str, Any], refusals: Refusals) -> None:
    """AdminError (400) naming the keys of ``changes`` that are no policy setting."""
    unknown = sorted(set(changes) - set(POLICY_KEYS))[:5]
    if unknown:
        names = ", ".join(shown(k) if refusals.cut_names else k for k in unknown)
        raise AdminError(msg(refusals.unknown, names=names, keys=", ".join(POLICY_KEYS)))


def policy_change(raw: Mapping[str, Any], changes: Mapping[str, Any], refusals: Refusals, *,
                  replace: bool = False) -> tuple[dict[str, Any], LTMConfig]:
    """``raw`` with ``changes`` applied and parsed; AdminError (400) for an
    unknown key or an invalid value (refused, not defaulted)."""
    refuse_unknown_keys(changes, refusals)
    merged = with_policy(dict(raw), dict(changes), replace=replace)
    cfg, problems = parse_config(merged)
    if problems:
        raise AdminError(msg(refusals.invalid, problems=refusal_message(problems)))
    return merged, cfg
