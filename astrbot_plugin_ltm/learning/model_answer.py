"""Reading an extraction model's answer as real models send it: reasoning blocks,
fences, prose, wrappers, other spellings, a cut-off array (docs/decisions.md#d89).
What cannot be read raises :class:`MalformedOutput`, so the events are retried.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any


class MalformedOutput(ValueError):
    """The model's whole answer could not be read as facts."""


@dataclass
class Answer:
    """The facts an answer holds, and what was wrong with its shape."""

    facts: list[Any]
    notes: list[str] = field(default_factory=list)  # e.g. "cut off after 2 facts"


_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.S | re.I)
_FENCE = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([\]}])")
_MAX_STARTS = 20  # JSON starts tried in prose: bounded work on a long answer

# Field names as models spell them → the prompt's names. Keys are compared
# lower-cased with "-", " " and camelCase folded to "_".
_FIELDS = {
    "statement": "fact", "content": "fact", "memory": "fact", "text": "fact",
    "事实": "fact", "内容": "fact", "记忆": "fact",
    "key": "fact_key", "factkey": "fact_key", "键": "fact_key", "事实键": "fact_key", "键名": "fact_key",
    "category": "type", "kind": "type", "类型": "type", "类别": "type",
    "conf": "confidence", "confidence_score": "confidence", "置信度": "confidence", "可信度": "confidence",
    "重要性": "importance", "重要度": "importance",
    "line": "lines", "line_numbers": "lines", "source_lines": "lines", "evidence": "lines",
    "行": "lines", "行号": "lines",
    "update": "updates", "supersedes": "updates", "更新": "updates",
    "sameas": "same_as", "duplicate_of": "same_as", "重复": "same_as",
}
_CANONICAL = frozenset(_FIELDS.values())
_TYPES = {
    "profile": "profile", "个人信息": "profile", "资料": "profile", "档案": "profile", "个人资料": "profile",
    "preference": "preference", "preferences": "preference", "偏好": "preference", "喜好": "preference",
    "task_state": "task_state", "task": "task_state", "plan": "task_state", "任务": "task_state",
    "计划": "task_state", "任务状态": "task_state",
    "constraint": "constraint", "constraints": "constraint", "约束": "constraint", "限制": "constraint",
    "episode": "episode", "event": "episode", "事件": "episode", "经历": "episode",
}
# An object whose one list under these names is the answer's facts.
_WRAPPERS = ("facts", "memories", "items", "results", "data", "事实", "记忆")


def read_answer(text: str | None) -> Answer:
    """The facts in ``text``; :class:`MalformedOutput` when there are none, so the events wait."""
    raw = _THINK.sub("", text or "").strip()
    if not raw:
        raise MalformedOutput("malformed answer from the model: it was empty")
    answer = _decode(raw)
    if answer is None:
        raise MalformedOutput(f"malformed answer from the model: no JSON in {raw[:200]!r}")
    payload = _unwrap(answer.facts)
    if not isinstance(payload, list):
        raise MalformedOutput(
            f"malformed answer from the model: {type(payload).__name__}, not a JSON array: {raw[:200]!r}")
    if payload and not any(isinstance(p, dict) for p in payload):
        # Plain sentences have no type, key or lines to check: asked again, the model may answer in shape.
        raise MalformedOutput(f"malformed answer from the model: a list without fact objects: {raw[:200]!r}")
    return Answer([_fields(p) if isinstance(p, dict) else p for p in payload], answer.notes)


def _decode(raw: str) -> Answer | None:
    """The first JSON value that reads as an answer: the whole text, a fenced block,
    then one starting at a bracket in prose."""
    for part in (raw, *_FENCE.findall(raw)):
        value = _loads(part.strip())
        if value is not None:
            return Answer(value)
    decoder = json.JSONDecoder()
    for start in [m.start() for m in re.finditer(r"[\[{]", raw)][:_MAX_STARTS]:
        try:
            value, _ = decoder.raw_decode(raw, start)
        except json.JSONDecodeError:
            kept = _complete_elements(raw, start) if raw[start] == "[" else []
            if kept and _holds_facts(kept):
                return Answer(kept, [f"answer cut off after {len(kept)} complete element(s)"])
            continue
        if _holds_facts(_unwrap(value)):
            return Answer(value)
    return None


def _holds_facts(value: Any) -> bool:
    """An empty list, or one with an object: what prose may hide."""
    return isinstance(value, list) and (not value or any(isinstance(v, dict) for v in value))


def _loads(text: str) -> Any:
    for attempt in (text, _TRAILING_COMMA.sub(r"\1", text)):
        try:
            value = json.loads(attempt)
        except json.JSONDecodeError:
            continue
        return value if isinstance(value, (list, dict)) else None
    return None


def _complete_elements(raw: str, start: int) -> list[Any]:
    """The elements of the array at ``start`` read before the text ends."""
    decoder = json.JSONDecoder()
    kept: list[Any] = []
    pos = start + 1
    while True:
        while pos < len(raw) and raw[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(raw) or raw[pos] == "]":
            return kept
        try:
            value, pos = decoder.raw_decode(raw, pos)
        except json.JSONDecodeError:
            return kept
        kept.append(value)


def _unwrap(value: Any) -> Any:
    """The list of facts in ``value``: itself, the one object, or the list it wraps; else None."""
    if isinstance(value, list):
        return value
    if not isinstance(value, dict):
        return None
    if not value:
        return []
    names = {_name(k): v for k, v in value.items()}
    if "fact" in names or any(_FIELDS.get(n) == "fact" for n in names):
        return [value]
    lists = [names[w] for w in _WRAPPERS if isinstance(names.get(w), list)]
    if not lists:
        lists = [v for v in value.values() if isinstance(v, list)]
    return lists[0] if len(lists) == 1 else None


def _name(key: Any) -> str:
    text = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", str(key)).strip().lower()
    return re.sub(r"[\s\-]+", "_", text)


def _fields(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with the prompt's field names and shapes; a field under its own name wins."""
    names = {_name(key): value for key, value in obj.items()}
    out = {name: value for name, value in names.items() if name in _CANONICAL}
    for name, value in names.items():
        if name not in _CANONICAL:
            out.setdefault(_FIELDS.get(name, name), value)
    for name, value in list(out.items()):
        if name in ("confidence", "importance"):
            out[name] = _number(value)
        elif name == "type" and isinstance(value, str):
            out[name] = _TYPES.get(_name(value), value)
        elif name == "lines":
            out[name] = _lines(value)
    return out


def _number(value: Any) -> Any:
    """A number written as text ("0.9", "90%") as a number; else as is."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        return value


def _lines(value: Any) -> Any:
    """Line numbers as ints: one number, numbers as text, "[3]" or "3, 4"."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, str)):
        value = [value]
    if not isinstance(value, list):
        return value
    out: list[Any] = []
    for n in value:
        if isinstance(n, str) and re.fullmatch(r"[\s\[\]\d,]*\d[\s\[\]\d,]*", n):
            out.extend(int(d) for d in re.findall(r"\d+", n))
        elif isinstance(n, float) and n.is_integer():
            out.append(int(n))
        else:
            out.append(n)
    return out
