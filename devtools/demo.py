"""Start a real AstrBot with this plugin; print the dashboard address and login.

    python -m devtools.demo [--offline-demo] [--port 6185] [--fresh]

The AstrBot home lives in ``.astrbot-home/`` and is kept between runs (your
memories, providers and settings stay); the plugin is re-copied from this
checkout at every start. ``LTM_DEMO_HOME`` and ``LTM_DEMO_PORT`` put the home
and the dashboard elsewhere (the test that runs the README's command does).

``--offline-demo`` also starts the fake model of ``devtools.fake_openai`` and
selects it, with the plugin in ``auto`` mode, so memories appear without any
API key.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
from pathlib import Path

from . import fake_openai
from .astrbot_home import (
    REPO,
    AstrBotProcess,
    free_port,
    install_plugin,
    prepare_home,
    provider_config,
    update_config,
    write_plugin_config,
)

HOME = Path(os.environ.get("LTM_DEMO_HOME") or REPO / ".astrbot-home")
PORT = int(os.environ.get("LTM_DEMO_PORT") or 6185)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=PORT, help=f"dashboard port (default {PORT})")
    parser.add_argument("--offline-demo", action="store_true", help="start a local fake model and use it")
    parser.add_argument("--fresh", action="store_true", help="discard .astrbot-home and start anew")
    args = parser.parse_args(argv)

    login_file = HOME / "LOGIN.txt"
    model = None
    model_port = None
    if args.offline_demo:
        model = fake_openai.serve(free_port())
        model_port = model.server_address[1]
    if args.fresh or not login_file.exists():
        password = "Ltm-" + secrets.token_urlsafe(9)
        prepare_home(HOME, dashboard_port=args.port, password=password, model_port=model_port)
        login_file.write_text(password + "\n")
    else:
        password = login_file.read_text().strip()
        install_plugin(HOME)
        if model_port is not None:
            update_config(HOME, provider_config(model_port))
    if args.offline_demo:
        write_plugin_config(HOME, {"write_policy": {"mode": "auto"}, "extraction": {"idle_seconds": 2}})

    bot = AstrBotProcess(HOME, args.port)
    print(f"Starting AstrBot in {HOME} (log: {bot.log_path}) …", flush=True)
    bot.start()
    print(
        f"\n  Dashboard: {bot.url}\n  Login:     astrbot / {password}\n"
        f"  Web chat:  {bot.url}/#/chat\n"
        f"  Memory review page: {bot.url}/#/plugin-view/astrbot_plugin_ltm/review\n",
        flush=True,
    )
    if args.offline_demo:
        print("  Offline demo: the fake model learns lines like 'My name is Alice and I live in Paris'\n"
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
