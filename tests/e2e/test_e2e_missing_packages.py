"""A real AstrBot whose Python lacks bpe-openai and snowballstemmer (the
dependency install failed: its pip mirror unreachable) loads the plugin,
answers, records turns and says what is missing in GET stats; once the
packages are there and AstrBot reloads the plugin, it is back to full
quality with its keyword index rebuilt with stems.

"Missing" is a stub package first on the bot's PYTHONPATH whose
``__init__.py`` raises ImportError while a marker file exists, and hands
over to the real package once it is gone (the install that came later).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from astrbot_plugin_ltm.storing.terms import decode, term_key
from devtools.astrbot_home import Client

pytestmark = pytest.mark.e2e

PACKAGES = ("snowballstemmer", "bpe_openai")
STUB = '''"""Stands in for the real package while ../MISSING exists."""
import importlib
import os
import sys

_STUBS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.exists(os.path.join(_STUBS, "MISSING")):
    raise ImportError(f"No module named {__name__!r} (e2e stub)", name=__name__)
# Installed since: import the real one from the paths after ours.
del sys.modules[__name__]
_saved = list(sys.path)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _STUBS]
try:
    sys.modules[__name__] = importlib.import_module(__name__)
finally:
    sys.path[:] = _saved
'''


def make_stubs(root: Path) -> Path:
    for package in PACKAGES:
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text(STUB)
    (root / "MISSING").touch()
    return root


@pytest.fixture(scope="module")
def stubs(tmp_path_factory) -> Path:
    return make_stubs(tmp_path_factory.mktemp("missing-packages") / "stubs")


@pytest.fixture(scope="module")
def bot(bot_factory, stubs):
    with pytest.MonkeyPatch.context() as env:
        # The bot's Python (astrbot_home.astrbot_env copies os.environ): the stubs first.
        env.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(stubs), os.environ.get("PYTHONPATH")])))
        # AstrBot's pip mirror unreachable, as the tester had it: nothing may be installed behind our back.
        unreachable = {"pypi_index_url": "http://127.0.0.1:9/simple/"}
        with bot_factory("missing-packages", {"write_policy": {"mode": "auto"}}, astrbot_config=unreachable) as b:
            yield b


def stats(bot, lang: str = "en") -> dict:
    answer = bot.client.request("GET", f"{Client.plugin_api()}/stats?lang={lang}")
    assert answer.get("status") == "ok", bot.diag(f"GET stats: {answer}")
    return answer["data"]


class TurnWords:
    """The turns' keyword terms (their hashes, storing.terms): ``word in`` them."""

    def __init__(self, keys: set[int]) -> None:
        self.keys = keys

    def __contains__(self, word: str) -> bool:
        return term_key(word) in self.keys


def turn_words(bot) -> TurnWords:
    return TurnWords({int(k) for row in bot.query("SELECT terms FROM ltm_turn_terms") for k in decode(row["terms"])})


def test_the_plugin_loads_answers_and_records_without_the_optional_packages(bot):
    log = bot.log_text()  # the bot started with the plugin loaded (conftest.Bot.start), saying why once each
    assert log.count("ltm: snowballstemmer is not installed") == 1, bot.diag("no single line about snowballstemmer")
    assert log.count("ltm: bpe-openai is not installed") == 1, bot.diag("no single line about bpe-openai")
    assert "Failed to install dependencies" not in log and "pip" not in log.lower(), bot.diag("AstrBot tried pip")

    said = "I keep all my old books in the attic"
    assert bot.chat(said, "alice", "missing-1") == f"ECHO: {said}"
    bot.wait_for(lambda: [e for e in bot.events("alice") if e["source_role"] == "user"], 20, "alice's turn recorded")
    stored = bot.query("SELECT built_with FROM ltm_index_builds WHERE name = 'keywords'")
    assert [r["built_with"] for r in stored] == ["none"]
    assert "books" in turn_words(bot)  # indexed as written: no stemmer


def test_get_stats_lists_what_is_missing_in_the_pages_language(bot):
    english = stats(bot)
    assert english["providers"] == {"chat": True, "embedding": True}
    missing = [n for n in english["notices"] if n["code"] == "notice.package_missing"]
    assert [("snowballstemmer" in n["message"], "bpe-openai" in n["message"]) for n in missing] == [
        (True, False), (False, True)]
    chinese = stats(bot, "zh")
    assert all("未安装 Python 包" in n["message"] for n in chinese["notices"]), chinese["notices"]


def test_once_installed_a_plugin_reload_brings_back_stems_and_exact_counts(bot, stubs):
    (stubs / "MISSING").unlink()  # the operator ran pip install -r requirements.txt
    since = bot.log_size()
    bot.reload_plugin()
    bot.wait_for(lambda: "ltm: keyword index rebuilt with snowballstemmer" in bot.log_text(since), 30,
                 "the keyword index rebuilt with stems")
    assert stats(bot)["notices"] == []
    stored = bot.query("SELECT built_with FROM ltm_index_builds WHERE name = 'keywords'")
    assert stored[0]["built_with"].startswith("snowballstemmer ")
    words = turn_words(bot)
    assert "book" in words and "books" not in words
    said = "Where did I put the book?"
    assert bot.chat(said, "alice", "missing-2") == f"ECHO: {said}"
    blocks = bot.memory_blocks(bot.turn_request(said))
    assert blocks and "attic" in blocks[0]["text"], bot.diag("the stemmed turn was not recalled")
