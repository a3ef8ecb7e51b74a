"""The README's first command, run as written, starts a real AstrBot with
the plugin and a local model, and a memory is learnt from a chat.

Only where it happens changes: ``LTM_DEMO_HOME`` and ``LTM_DEMO_PORT`` keep
it out of a developer's own ``.astrbot-home`` and port."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from devtools.astrbot_home import Client, free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
API = Client.plugin_api()


def readme_demo_command() -> str:
    block = re.search(r"```bash\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), re.S)
    assert block, "the README has no command block"
    command = block.group(1).splitlines()[0].split("#")[0].strip()
    assert command == "./scripts/run.sh --offline-demo"
    return command


class Output:
    """The command's output, read as it comes."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert proc.stdout is not None
        stream = proc.stdout
        threading.Thread(target=lambda: self.lines.extend(stream), daemon=True).start()

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if found := re.search(pattern, line):
                    return found
            time.sleep(0.2)
        raise AssertionError(f"no {pattern!r} within {timeout}s; output:\n{''.join(self.lines)[-4000:]}")


def test_the_readme_demo_command_starts_a_bot_that_learns_a_memory(tmp_path):
    port = free_port()
    env = {**os.environ, "LTM_DEMO_HOME": str(tmp_path / "home"), "LTM_DEMO_PORT": str(port),
           "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(["bash", "-c", readme_demo_command()], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    output = Output(proc)
    try:
        url = output.wait_for(r"Dashboard:\s+(http://\S+)", 240).group(1)
        password = output.wait_for(r"Login:\s+astrbot / (\S+)", 5).group(1)
        # The demo runs in auto mode, not the default shadow, and says so.
        assert "default is shadow" in output.wait_for(r"Memory write mode: auto: (.*)", 5).group(1)
        assert url == f"http://127.0.0.1:{port}"
        client = Client(url)
        client.login(password)
        client.create_api_key("readme-demo")
        reply = client.chat("My name is Alice and I live in Paris", username="alice", session_id="first")
        assert reply.strip()

        deadline, facts = time.monotonic() + 90, []
        while time.monotonic() < deadline and not any("Paris" in f for f in facts):
            answer = client.request("GET", f"{API}/items?status=active")
            facts = [item["fact"] for item in (answer.get("data") or {}).get("items", [])]
            time.sleep(0.5)
        assert any("Paris" in fact for fact in facts), f"no memory learnt; active memories: {facts}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    assert proc.returncode == 0, "".join(output.lines)[-4000:]
    assert any("Stopping AstrBot" in line for line in output.lines)
