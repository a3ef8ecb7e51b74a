"""The time a message names: "5月3号", "昨天", "上周五", "last Friday", "第一次"…

Pure functions: read in the user's time zone, as a half-open UTC period. A date
without a year is the latest not after the message. Vague words ("最近", "a few days
ago") name no period: lifting the last days lost such answers (docs/decisions.md#d61).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


@dataclass(frozen=True)
class Period:
    """[start, end) in aware UTC."""

    start: datetime
    end: datetime

    def holds(self, at: datetime) -> bool:
        at = at.replace(tzinfo=UTC) if at.utcoffset() is None else at
        return self.start <= at < self.end


@dataclass(frozen=True)
class First:
    """The scope's earliest conversation (its first day), resolved by the reader."""


FIRST = First()


def time_zone(name: str | None) -> tzinfo:
    """AstrBot's ``timezone`` setting as a tzinfo; UTC when unset or unknown."""
    if not name:
        return UTC
    try:
        return ZoneInfo(str(name).strip())
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def day_period(day: date, tz: tzinfo, days: int = 1) -> Period:
    """``days`` local days from ``day``'s midnight, in UTC."""
    start = datetime(day.year, day.month, day.day, tzinfo=tz)
    end_day = day + timedelta(days=days)
    end = datetime(end_day.year, end_day.month, end_day.day, tzinfo=tz)
    return Period(start.astimezone(UTC), end.astimezone(UTC))


def _month_period(year: int, month: int, tz: tzinfo) -> Period:
    first = date(year, month, 1)
    after = date(year + month // 12, month % 12 + 1, 1)
    return day_period(first, tz, (after - first).days)


def _year_period(year: int, tz: tzinfo) -> Period:
    return day_period(date(year, 1, 1), tz, (date(year + 1, 1, 1) - date(year, 1, 1)).days)


def _shift_months(year: int, month: int, by: int) -> tuple[int, int]:
    n = year * 12 + (month - 1) + by
    return n // 12, n % 12 + 1


def _valid(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _latest(month: int, day: int, today: date) -> date | None:
    """The latest ``month``/``day`` not after ``today`` (this year's, else last year's)."""
    for year in (today.year, today.year - 1):
        found = _valid(year, month, day)
        if found is not None and found <= today:
            return found
    return None


def _latest_month(month: int, today: date) -> int:
    """The year of the latest ``month`` that has begun by ``today``."""
    return today.year if month <= today.month else today.year - 1


# -- numbers: digits, Chinese numerals, English words -----------------------------

_CN_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
              "八": 8, "九": 9}
_EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
               "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2}
CN_NUM = r"[0-9]{1,2}|[零〇一二两三四五六七八九十]{1,3}"


def number(text: str) -> int | None:
    """12, 十二, 三十一, two, a couple of → an int (None if unreadable)."""
    text = text.strip().lower()
    if text.isdigit():
        return int(text)
    if text in _EN_NUMBERS:
        return _EN_NUMBERS[text]
    if not text or any(c not in _CN_DIGITS and c != "十" for c in text):
        return None
    if "十" not in text:
        return _CN_DIGITS[text] if len(text) == 1 else None
    tens, _, ones = text.partition("十")
    value = (_CN_DIGITS.get(tens, -99) if tens else 1) * 10 + (_CN_DIGITS.get(ones, -99) if ones else 0)
    return value if value >= 0 else None


# -- weekdays ---------------------------------------------------------------------------

_CN_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "末": 5}
_EN_WEEKDAYS = {name: i for i, name in enumerate(
    ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))}
_MONTHS = {name: i + 1 for i, name in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"))}
_MONTHS.update({name[:3]: n for name, n in list(_MONTHS.items())})


def _week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


# -- the expressions, in the order they are tried ------------------------------------------

# What an expression resolves to, from its match, today and the time zone.
Resolver = Callable[[re.Match[str], date, tzinfo], "Period | First | None"]

_EN_MONTH = r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|" \
            r"sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_YEAR = r"(?:,?\s*(?P<y>\d{4}))?"
_EN_NUM = r"\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|(?:a )?couple of|(?:a )?few"
_UNIT_DAYS = {"day": 1, "天": 1, "日": 1, "week": 7, "周": 7, "星期": 7, "礼拜": 7}


def _cn_full_date(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
    year, month, day = int(m["y"]), number(m["m"]), number(m["d"])
    found = _valid(year, month or 0, day or 0)
    return day_period(found, tz) if found else None


def _cn_date(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
    month, day = number(m["m"]), number(m["d"])
    found = _latest(month or 0, day or 0, today) if month and day else None
    return day_period(found, tz) if found else None


def _cn_year_month(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
    year, month = int(m["y"]), number(m["m"])
    return _month_period(year, month, tz) if month and 1 <= month <= 12 else None


def _cn_month(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
    month = number(m["m"])
    if not month or not 1 <= month <= 12:
        return None
    return _month_period(_latest_month(month, today), month, tz)


def _relative_day(back: int) -> Resolver:
    def resolve(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
        return day_period(today - timedelta(days=back), tz)
    return resolve


def _cn_weekday(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
    which, name = m["w"], m["d"]
    weekday = _CN_WEEKDAYS[name]
    weeks_back = {"上上": 2, "上": 1, "这": 0, "本": 0, "今": 0}.get(which or "")
    if weeks_back is None:  # "周五": the latest Friday, today's included
        back = (today.weekday() - weekday) % 7
        found = today - timedelta(days=back)
    else:
        found = _week_start(today) - timedelta(days=7 * weeks_back) + timedelta(days=weekday)
    days = 2 if name == "末" else 1
    return day_period(found, tz, days)


def _cn_week(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
    weeks_back = {"上上": 2, "上": 1, "这": 0, "本": 0}[m["w"]]
    start = _week_start(today) - timedelta(days=7 * weeks_back)
    return day_period(start, tz, 7)


def _month_back(back: int) -> Resolver:
    def resolve(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
        year, month = _shift_months(today.year, today.month, -back)
        return _month_period(year, month, tz)
    return resolve


def _year_back(back: int) -> Resolver:
    def resolve(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
        return _year_period(today.year - back, tz)
    return resolve


def _ago(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
    """"3 days ago" → that day; "two weeks ago" → that week (Monday to
    Sunday); "3个月前" → that month; "a year ago" → that year."""
    n = number(m["n"])
    if n is None or n > 400:  # "几天前", "a few days ago": vague, no period
        return None
    unit = m["u"].lower().rstrip("s")
    if unit in ("month", "月"):
        year, month = _shift_months(today.year, today.month, -n)
        return _month_period(year, month, tz)
    if unit in ("year", "年"):
        return _year_period(today.year - n, tz)
    step = _UNIT_DAYS[unit]
    if step == 1:
        return day_period(today - timedelta(days=n), tz)
    return day_period(_week_start(today - timedelta(days=7 * n)), tz, 7)


def _month_named(m: re.Match[str]) -> int | None:
    """The month a match names; a lower-case "may" is the verb ("I may 2…")."""
    return None if m["mon"] == "may" else _MONTHS.get(m["mon"].lower()[:3])


def _en_month_day(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
    month = _month_named(m)
    day = int(m["d"])
    if month is None:
        return None
    found = _valid(int(m["y"]), month, day) if m["y"] else _latest(month, day, today)
    return day_period(found, tz) if found else None


def _en_month(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
    month = _month_named(m)
    if month is None:
        return None
    year = int(m["y"]) if m["y"] else _latest_month(month, today)
    return _month_period(year, month, tz)


def _iso(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
    found = _valid(int(m["y"]), int(m["m"]), int(m["d"]))
    return day_period(found, tz) if found else None


def _en_weekday(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
    """"last Friday" / "on Friday": the latest before today; "this Friday": this week's, if come."""
    weekday = _EN_WEEKDAYS[m["d"].lower()]
    if (m["w"] or "").lower() == "this":
        found = _week_start(today) + timedelta(days=weekday)
        return day_period(found, tz) if found <= today else None
    back = (today.weekday() - weekday) % 7 or 7
    return day_period(today - timedelta(days=back), tz)


def _en_week(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
    back = 1 if m["w"].lower() in ("last", "previous") else 0
    return day_period(_week_start(today) - timedelta(days=7 * back), tz, 7)


def _en_weekend(m: re.Match[str], today: date, tz: tzinfo) -> Period | None:
    saturday = _week_start(today) + timedelta(days=5)
    if saturday > today or (m["w"] or "").lower() == "last" and saturday + timedelta(days=1) >= today:
        saturday -= timedelta(days=7)
    return day_period(saturday, tz, 2)


def _first(m: re.Match[str], today: date, tz: tzinfo) -> First:
    return FIRST


_RULES: list[tuple[re.Pattern[str], Resolver]] = [
    (re.compile(r"(?P<y>\d{4})\s*年\s*(?P<m>" + CN_NUM + r")\s*月\s*(?P<d>" + CN_NUM + r")\s*[日号號]"), _cn_full_date),
    (re.compile(r"(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})"), _iso),
    (re.compile(r"(?<![\d年])(?P<m>" + CN_NUM + r")\s*月\s*(?P<d>" + CN_NUM + r")\s*[日号號]"), _cn_date),
    (re.compile(r"(?P<y>\d{4})\s*年\s*(?P<m>" + CN_NUM + r")\s*月(?!\s*(?:" + CN_NUM + r"))"), _cn_year_month),
    (re.compile(r"大前天"), _relative_day(3)),
    (re.compile(r"前天|the day before yesterday", re.I), _relative_day(2)),
    (re.compile(r"昨天|昨日|昨晚|yesterday", re.I), _relative_day(1)),
    (re.compile(r"今天|今日|今晚|\btoday\b|\btonight\b", re.I), _relative_day(0)),
    (re.compile(r"(?P<w>上上|上|这|本|今)?(?:个)?(?:周|星期|礼拜)(?P<d>[一二三四五六日天末])"), _cn_weekday),
    (re.compile(r"(?P<w>上上|上|这|本)(?:个)?(?:周|星期|礼拜)"), _cn_week),
    (re.compile(r"上上(?:个)?月"), _month_back(2)),
    (re.compile(r"上(?:个)?月"), _month_back(1)),
    (re.compile(r"(?:这|本)(?:个)?月"), _month_back(0)),
    (re.compile(r"前年"), _year_back(2)),
    (re.compile(r"去年"), _year_back(1)),
    (re.compile(r"(?P<n>" + CN_NUM + r"|几)\s*(?:个)?\s*(?P<u>天|日|周|星期|礼拜|月|年)(?:之|以)?前"), _ago),
    (re.compile(r"(?<![\d月])(?P<m>" + CN_NUM + r")\s*月份?(?![\d一二三四五六七八九十]|\s*[日号號])"), _cn_month),
    (re.compile(r"第一次|头一次|最早|\bfirst (?:time|conversation|chat|talk)|\bwe first (?:met|talked|spoke|chatted)",
                re.I), _first),
    (re.compile(r"\b(?P<n>" + _EN_NUM + r")\s+(?P<u>days?|weeks?|months?|years?)\s+ago\b",
                re.I), _ago),
    (re.compile(r"\b" + _EN_MONTH + r"\.?\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?\b" + _YEAR,
                re.I), _en_month_day),
    (re.compile(r"\b(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _EN_MONTH + r"\b" + _YEAR,
                re.I), _en_month_day),
    (re.compile(r"\b(?P<w>last|this|on|past)\s+(?P<d>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
                re.I), _en_weekday),
    (re.compile(r"\b(?P<w>last|this|previous)\s+weekend\b|\b(?P<x>the)\s+weekend\b", re.I), _en_weekend),
    (re.compile(r"\b(?P<w>last|this|previous)\s+week\b", re.I), _en_week),
    (re.compile(r"\b(?:last|previous)\s+month\b", re.I), _month_back(1)),
    (re.compile(r"\bthis\s+month\b", re.I), _month_back(0)),
    (re.compile(r"\blast\s+year\b", re.I), _year_back(1)),
    (re.compile(r"\b(?:in|during|of|since)\s+" + _EN_MONTH + r"\b" + _YEAR, re.I), _en_month),
]


# Every rule at once, groups unnamed: one search tells most messages, which
# name no time, from the rest (matching each rule in turn costs ~60 µs).
_ANY_RULE = re.compile("|".join(f"(?:{re.sub(r'[(][?]P<[a-z]+>', '(?:', pattern.pattern)})"
                                for pattern, _ in _RULES), re.I)


def without_dates(message: str) -> str:
    """``message`` with every time expression taken out."""
    return _ANY_RULE.sub(" ", message)


def named_period(message: str, now: datetime, tz: tzinfo = UTC) -> Period | First | None:
    """The period the message names, relative to ``now`` in ``tz``: the first expression wins."""
    if _ANY_RULE.search(message) is None:
        return None
    today = now.astimezone(tz).date()
    hits: list[tuple[int, int, Period | First]] = []
    for order, (pattern, resolve) in enumerate(_RULES):
        for m in pattern.finditer(message):
            found = resolve(m, today, tz)
            if found is not None:
                hits.append((m.start(), order, found))
                break
    if not hits:
        return None
    return min(hits, key=lambda hit: (hit[0], hit[1]))[2]
