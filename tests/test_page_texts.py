"""The review page's texts: one copy, ``views.review`` of the locale files
``.astrbot-plugin/i18n/<locale>.json`` (the files AstrBot's dashboard reads),
complete for every key the page uses, in both languages; and the ``texts``
route that serves them to a dashboard that hands the page none.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import dashboard_routes

REPO = Path(__file__).resolve().parents[1]
PAGE_DIR = REPO / "pages" / "review"
I18N_DIR = REPO / ".astrbot-plugin" / "i18n"
LOCALES = ("en-US", "zh-CN")


def flatten(tree: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, path + "."))
        else:
            out[path] = value
    return out


def texts(locale: str) -> dict[str, Any]:
    return flatten(json.loads((I18N_DIR / f"{locale}.json").read_text(encoding="utf-8"))["views"]["review"])


def page_scripts() -> list[str]:
    """The page's scripts in the order index.html loads them (the dashboard's bridge left out)."""
    html = (PAGE_DIR / "index.html").read_text(encoding="utf-8")
    return re.findall(r'<script src="([\w.-]+)"', html)


def used_keys() -> set[str]:
    """Every key the page names: index.html's data-i18n attributes, and the
    string literals in the first argument of each T(…)/t(…) call of the
    scripts, under the prefix of a script's own T (drift.js: "drift.").
    A key ending in "." is a group the page completes at run time."""
    html = (PAGE_DIR / "index.html").read_text(encoding="utf-8")
    used = set(re.findall(r'data-i18n(?:-placeholder|-label)?="([a-z_.]+)"', html))
    for name in page_scripts():
        code = (PAGE_DIR / name).read_text(encoding="utf-8")
        own = dict(re.findall(r'const ([Tt]) = \(key, vars\) => L\.T\("([a-z_.]+)" \+ key', code))
        for call in re.finditer(r"(?<![\w$])(L\.T|T|t)\(([^,()]*)", code):
            prefix = own.get(call.group(1), "")
            argument = re.sub(r'[!=]==?\s*"[^"]*"', "", call.group(2))  # a condition's value is no key
            used |= {prefix + key for key in re.findall(r'"([a-z_]+(?:\.[a-z_]+)*\.?)"', argument)}
    return used


def test_every_key_the_page_uses_is_in_both_locale_files():
    used = used_keys()
    assert {"title", "tabs.audit", "status.", "drift.kind.", "replay.set.", "history.rollback"} <= used, used
    for locale in LOCALES:
        defined = texts(locale)
        missing = sorted(k for k in used if not k.endswith(".") and k not in defined)
        assert not missing, f"{locale}.json lacks texts the page uses: {missing}"
        for group in (k for k in used if k.endswith(".")):  # T("types." + type) and the like
            assert any(k.startswith(group) for k in defined), (locale, group)


def test_both_languages_have_the_same_texts_with_the_same_placeholders():
    en, zh = texts("en-US"), texts("zh-CN")
    assert set(en) == set(zh), f"keys in one language only: {sorted(set(en) ^ set(zh))}"
    for key, text in en.items():
        assert isinstance(text, str) and text.strip() and isinstance(zh[key], str) and zh[key].strip(), key
        assert set(re.findall(r"\{\w+\}", text)) == set(re.findall(r"\{\w+\}", zh[key])), key
    chinese = sum(1 for v in zh.values() if re.search(r"[\u4e00-\u9fff]", v))
    assert chinese > len(zh) * 0.8, "zh-CN is mostly untranslated"
    for locale in LOCALES:
        data = json.loads((I18N_DIR / f"{locale}.json").read_text(encoding="utf-8"))
        assert {"metadata", "config"} <= set(data), f"{locale}: the plugin's metadata/config texts are gone"
        assert data["pages"]["review"]["title"] == data["views"]["review"]["title"]  # dashboard menu = page title


def test_the_page_holds_no_english_of_its_own():
    html = (PAGE_DIR / "index.html").read_text(encoding="utf-8")
    # An element with a key shows nothing until the texts are applied: never a second copy.
    inline = re.findall(r'<(\w+)\b[^>]*\sdata-i18n="[^"]*"[^>]*>([^<]*[A-Za-z][^<]*)</\1>', html)
    assert not inline, inline
    assert not re.search(r'data-i18n-placeholder="[^"]*"[^>]*\splaceholder=', html)
    assert not list(PAGE_DIR.glob("texts_*.js"))


def test_the_texts_route_serves_the_locale_and_english_as_the_bridge_does():
    answer = dashboard_routes.page_texts("zh-CN")
    assert set(answer) == {"en-US", "zh-CN"}
    assert flatten(answer["zh-CN"]["views"]["review"]) == texts("zh-CN")
    assert flatten(answer["en-US"]["views"]["review"]) == texts("en-US")
    for asked in ("fr-FR", "../en-US", "/etc/passwd", None, ""):
        assert set(dashboard_routes.page_texts(asked)) == {"en-US"}, asked


async def test_the_texts_route_answers_without_the_plugin_running(monkeypatch):
    class Query:
        r = None

        def query(self) -> dict[str, str]:
            return {"locale": "en-US"}

    monkeypatch.setattr(dashboard_routes, "req", Query())
    (view,) = [v for route, v, _, _ in dashboard_routes.routes(lambda: None) if route.endswith("/texts")]
    body, status = await view()
    assert status == 200 and body["status"] == "ok"
    assert body["data"]["en-US"]["views"]["review"]["title"] == texts("en-US")["title"]
