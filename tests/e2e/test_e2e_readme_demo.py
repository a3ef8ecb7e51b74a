"""The README's first command, run as written, starts a real AstrBot with
the plugin and a local model, says so in the README's language, learns the
README's own examples from a chat and answers from them in a new chat, with
no error in AstrBot's log (its online checks are off).

Only where it happens changes: ``LTM_DEMO_HOME`` and ``LTM_DEMO_PORT`` keep
it out of a developer's own ``.astrbot-home`` and port; ``LTM_DEMO_LANG``
makes the language the one a Chinese operator's terminal would give."""

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
           "PYTHONUNBUFFERED": "1", "LTM_DEMO_LANG": "zh"}
    proc = subprocess.Popen(["bash", "-c", readme_demo_command()], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    output = Output(proc)
    try:
        url = output.wait_for(r"管理面板：\s*(http://\S+)", 240).group(1)
        password = output.wait_for(r"登录：\s+astrbot / (\S+)", 5).group(1)
        # The demo runs in auto mode, not the default shadow, and says so.
        assert "插件默认是 shadow" in output.wait_for(r"记忆写入模式：auto：(.*)", 5).group(1)
        assert url == f"http://127.0.0.1:{port}"
        assert "我养了一只猫，叫咪咪" in output.wait_for(r"在网页聊天里说：(.*)", 5).group(1)
        client = Client(url)
        client.login(password)
        client.create_api_key("readme-demo")
        for said in ("我叫小明，住在上海", "我养了一只猫，叫咪咪", "我是一名程序员"):
            assert client.chat(said, username="xiaoming", session_id="first") == "好的，知道了。"
        wait_for_facts(client, {"小明住在上海", "小明养了一只猫，叫咪咪", "小明是一名程序员"})
        client.chat("我从上海搬到了杭州", username="xiaoming", session_id="first")
        wait_for_facts(client, {"小明住在杭州"})
        # A new chat: the bot answers from what it remembers.
        assert client.chat("我住在哪里？", username="xiaoming", session_id="second") == "我记得：小明住在杭州。"
        log = (tmp_path / "home" / "astrbot.stdout.log").read_text(errors="replace")
        assert "[ERRO]" not in log and "Traceback" not in log and "models.dev" not in log, log[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    assert proc.returncode == 0, "".join(output.lines)[-4000:]
    assert any("正在停止 AstrBot" in line for line in output.lines)


def wait_for_facts(client: Client, wanted: set[str], timeout: float = 90) -> None:
    deadline, facts = time.monotonic() + timeout, set[str]()
    while time.monotonic() < deadline and not wanted <= facts:
        answer = client.request("GET", f"{API}/items?status=active&page_size=50")
        facts = {item["fact"] for item in (answer.get("data") or {}).get("items", [])}
        time.sleep(0.5)
    assert wanted <= facts, f"not learnt: {sorted(wanted - facts)}; active memories: {sorted(facts)}"
