"""What a policy rollback would change, before it is made (``dry_run``).

The warnings name the changes an operator should not make by accident.
"""

from __future__ import annotations

from typing import Any

from ..config import LTMConfig, policy_of
from ..enums import WriteMode
from ..errors import AdminError
from ..i18n import Lang, Message, msg
from .policy_versions import PolicyVersions, diff

# A lower value of these keeps more: each lowered is a warning.
THRESHOLDS = ("write_policy.min_confidence", "write_policy.min_evidence_count")
SWITCHES = {  # path → (code when it turns off, code when it turns on)
    "enable": ("rollback.warn.memory_off", "rollback.warn.memory_on"),
    "write_policy.enable": ("rollback.warn.learning_off", "rollback.warn.learning_on"),
    "read_policy.enable": ("rollback.warn.recall_off", "rollback.warn.recall_on"),
}


def _names(values: Any) -> list[str]:
    return [str(v) for v in values] if isinstance(values, list) else []


def warnings(changes: list[dict[str, Any]]) -> list[Message]:
    """The changes in ``changes`` (``{"path", "from", "to"}``) that matter, as messages."""
    out: list[Message] = []
    for change in changes:
        path, before, after = change["path"], change["from"], change["to"]
        if path == "write_policy.mode":
            auto = after == WriteMode.AUTO
            out.append(msg("rollback.warn.mode_auto", before=before) if auto
                       else msg("rollback.warn.mode", before=before, after=after))
        elif path == "write_policy.disabled_scopes":
            old, new = _names(before), _names(after)
            out += [msg("rollback.warn.writes_on", scope=s) for s in old if s not in new]
            out += [msg("rollback.warn.writes_off", scope=s) for s in new if s not in old]
        elif path == "emergency_read_only":
            out.append(msg("rollback.warn.read_only_on" if after else "rollback.warn.read_only_off"))
        elif path in SWITCHES:
            off, on = SWITCHES[path]
            out.append(msg(on if after else off))
        elif path == "write_policy.require_approval_types":
            fewer = [t for t in _names(before) if t not in _names(after)]
            if fewer:
                out.append(msg("rollback.warn.approval_fewer", types=", ".join(fewer)))
        elif path == "write_policy.allowed_types":
            more = [t for t in _names(after) if t not in _names(before)]
            if more:
                out.append(msg("rollback.warn.types_more", types=", ".join(more)))
        elif path in THRESHOLDS and isinstance(before, (int, float)) and isinstance(after, (int, float)) \
                and after < before:
            out.append(msg("rollback.warn.threshold_lower", setting=path, before=before, after=after))
    return out


async def preview(versions: PolicyVersions, config: LTMConfig, version: int, lang: Lang) -> dict[str, Any]:
    """``{"diff", "warnings"}`` of rolling back to ``version``; writes nothing."""
    target = await versions.get(version)
    if target is None:
        raise AdminError(msg("api.no_version", version=version), 404)
    changes = diff(policy_of(config), target["policy"])
    return {"version": version, "diff": changes,
            "warnings": [{"code": m.code, "message": m.render(lang)} for m in warnings(changes)]}
