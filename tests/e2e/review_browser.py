"""The review page in headless Chromium, for the e2e tests: a small Chrome
DevTools-protocol driver (nothing but the standard library and
``websockets``, an AstrBot dependency), opening the page the way the
dashboard does, and a screenshot when a browser test fails. The ``tab``
fixture (conftest.py) hands a test a fresh :class:`Tab`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.astrbot_home import LEGACY_DASHBOARD, PLUGIN_PAGE_ROUTE

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts"
VIEW = PLUGIN_PAGE_ROUTE.format("astrbot_plugin_ltm", "review")
# Where AstrBot serves the page's files (the iframe's address), and where it
# tells the dashboard that address: both moved in AstrBot 4.29.
if LEGACY_DASHBOARD:
    FRAME_URL_PART = "/api/plugin/page/content/astrbot_plugin_ltm/review/"
    PAGE_ENTRY = "/api/plugin/page/entry?name=astrbot_plugin_ltm&page=review"
else:
    FRAME_URL_PART = "/astrbot_plugin_ltm/views/review/"
    PAGE_ENTRY = "/api/v1/plugins/view?plugin_id=astrbot_plugin_ltm&page_name=review"
WIDTH, HEIGHT = 1400, 1000

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-default-browser-check", "--no-proxy-server", "--hide-scrollbars",
]


# -- a small DevTools-protocol driver ----------------------------------------------------------


class CDPError(RuntimeError):
    pass


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(
        "Chromium is not installed, so the review page cannot be tested. Run ./scripts/setup.sh as root "
        "(it installs Debian's chromium with apt-get) or install it yourself: sudo apt-get install chromium",
        pytrace=False,
    )


class Browser:
    """A headless Chromium on a DevTools port chosen by Chromium itself."""

    def __init__(self, binary: str) -> None:
        from websockets.sync.client import connect

        self.dir = Path(tempfile.mkdtemp(prefix="ltm-chromium-"))
        self.log_path = self.dir / "chromium.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [binary, *CHROMIUM_FLAGS, f"--user-data-dir={self.dir / 'profile'}", "--remote-debugging-port=0",
                 f"--window-size={WIDTH},{HEIGHT}", "about:blank"],
                stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
            )
        port_file = self.dir / "profile" / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self.proc.poll() is not None:
                raise CDPError(f"chromium exited with {self.proc.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise CDPError(f"chromium wrote no DevToolsActivePort in 30 s:\n{self.log()}")
            time.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        self.ws = connect(f"ws://127.0.0.1:{port}{path}", max_size=None, open_timeout=10)
        self.next_id = 0
        self.events: list[dict] = []

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30) -> dict:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CDPError(f"{method}: no answer in {timeout}s")
            data = json.loads(self.ws.recv(timeout=remaining))
            if data.get("id") == self.next_id:
                if "error" in data:
                    raise CDPError(f"{method}: {data['error']}")
                return data.get("result", {})
            if "method" in data:
                self.events.append(data)

    def pump(self) -> None:
        """Collect the events that arrived meanwhile."""
        while True:
            try:
                data = json.loads(self.ws.recv(timeout=0.01))
            except TimeoutError:
                return
            if "method" in data:
                self.events.append(data)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


class Tab:
    """One page; reaches into the plugin's iframe (in or out of process)."""

    def __init__(self, browser: Browser) -> None:
        self.b = browser
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        self.send("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True})
        self.frame_session: str | None = None
        self.frame_context: int | None = None

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30) -> dict:
        return self.b.send(method, params, session or self.session, timeout)

    def evaluate(self, expression: str, *, in_frame: bool = False, timeout: float = 30) -> Any:
        params: dict[str, Any] = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        session = None
        if in_frame:
            if self.frame_session:
                session = self.frame_session
            else:
                params["contextId"] = self.frame_context
        result = self.send("Runtime.evaluate", params, session=session, timeout=timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise CDPError(f"JS error in {expression[:80]!r}: "
                           f"{details.get('exception', {}).get('description') or details.get('text')}")
        return result["result"].get("value")

    def frame(self, expression: str, timeout: float = 30) -> Any:
        return self.evaluate(expression, in_frame=True, timeout=timeout)

    def navigate(self, url: str) -> None:
        self.frame_session = self.frame_context = None
        self.send("Page.navigate", {"url": url})

    def find_frame(self) -> bool:
        """Attach to the review page's iframe: an out-of-process target, or a
        frame of this page (then an isolated world in it; same DOM)."""
        self.b.pump()
        for event in self.b.events:
            if event.get("method") != "Target.attachedToTarget":
                continue
            if event["params"]["targetInfo"].get("type") != "iframe":
                continue
            sid = event["params"]["sessionId"]
            try:
                href = self.evaluate_in(sid, "location.href")
            except CDPError:
                continue
            if FRAME_URL_PART in (href or ""):
                self.frame_session = sid
                self.send("Runtime.enable", session=sid)
                return True
        stack = [self.send("Page.getFrameTree")["frameTree"]]
        while stack:
            node = stack.pop()
            if FRAME_URL_PART in node["frame"].get("url", ""):
                self.frame_context = self.send(
                    "Page.createIsolatedWorld", {"frameId": node["frame"]["id"], "worldName": "ltm-e2e"}
                )["executionContextId"]
                return True
            stack.extend(node.get("childFrames", []))
        return False

    def evaluate_in(self, session: str, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session,
                           timeout=5)
        if "exceptionDetails" in result:
            raise CDPError(str(result["exceptionDetails"]))
        return result["result"].get("value")

    def wait(self, predicate, what: str, timeout: float = 20.0, interval: float = 0.1) -> Any:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while True:
            try:
                value = predicate()
                if value:
                    return value
            except CDPError as exc:
                last = exc
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}" + (f" ({last})" if last else ""))
            time.sleep(interval)

    def click(self, selector: str) -> None:
        """A real mouse click at the centre of the element in the iframe."""
        box = self.frame(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)}); if (!el) return null;"
            " el.scrollIntoView({block: 'center'}); const r = el.getBoundingClientRect();"
            " return {x: r.left + r.width / 2, y: r.top + r.height / 2, disabled: !!el.disabled}; })()"
        )
        assert box, f"nothing matches {selector} in the review page"
        assert not box["disabled"], f"{selector} is disabled"
        frame = self.evaluate(
            "(() => { const r = document.querySelector('iframe').getBoundingClientRect();"
            " return {x: r.left, y: r.top}; })()"
        )
        x, y = frame["x"] + box["x"], frame["y"] + box["y"]
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            params = {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}
            if kind == "mouseMoved":
                params = {"type": kind, "x": x, "y": y}
            self.send("Input.dispatchMouseEvent", params)

    def click_in_page(self, expression: str, what: str) -> None:
        """A real mouse click at the centre of the element ``expression``
        (JavaScript) gives, in the dashboard itself rather than the iframe."""
        box = self.evaluate(
            f"(() => {{ const el = {expression}; if (!el) return null; el.scrollIntoView({{block: 'center'}});"
            " const r = el.getBoundingClientRect(); return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()"
        )
        assert box, f"{what} is not in the dashboard"
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": box["x"], "y": box["y"]})
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent",
                      {"type": kind, "x": box["x"], "y": box["y"], "button": "left", "clickCount": 1})

    def type(self, selector: str, text: str) -> None:
        """Focus a field with a click, then type into it like a keyboard."""
        self.click(selector)
        self.frame(f"document.querySelector({json.dumps(selector)}).select(); true")
        self.send("Input.insertText", {"text": text})

    def choose_file(self, selector: str, path: Path) -> None:
        """Put a file into a file input of the iframe, as a user choosing it
        would (the input's change event fires)."""
        params: dict[str, Any] = {"expression": f"document.querySelector({json.dumps(selector)})"}
        if self.frame_session is None:
            params["contextId"] = self.frame_context
        found = self.send("Runtime.evaluate", params, session=self.frame_session)
        object_id = found["result"].get("objectId")
        assert object_id, f"nothing matches {selector} in the review page"
        self.send("DOM.setFileInputFiles", {"files": [str(path)], "objectId": object_id},
                  session=self.frame_session)

    def allow_downloads(self, directory: Path) -> None:
        self.b.send("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(directory)})

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def page_errors(self) -> list[str]:
        self.b.pump()
        out = []
        for event in self.b.events:
            if event.get("method") == "Runtime.exceptionThrown":
                details = event["params"]["exceptionDetails"]
                out.append(details.get("exception", {}).get("description") or details.get("text", ""))
            elif event.get("method") == "Runtime.consoleAPICalled" and event["params"].get("type") == "error":
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in event["params"]["args"]))
        return out


# -- the page in the dashboard -----------------------------------------------------------------


LEGACY_THEMES = {"light": "PurpleTheme", "dark": "PurpleThemeDark"}


def log_in(bot, tab: Tab, locale: str = "en-US", theme: str = "light") -> None:
    """The dashboard keeps its login in localStorage (token, user): set on
    its origin, with its language and theme, as the dashboard itself does."""
    tab.navigate(bot.url + "/api/stat/start-time")
    tab.wait(lambda: tab.evaluate("document.readyState === 'complete' && location.origin") == bot.url, "the origin")
    tab.evaluate(
        f"localStorage.setItem('token', {json.dumps(bot.client.token)});"
        "localStorage.setItem('user', 'astrbot');"
        f"localStorage.setItem('astrbot-locale', {json.dumps(locale)});"
        f"localStorage.setItem('themeMode', {json.dumps(theme)}); true"
    )
    if LEGACY_DASHBOARD:  # before 4.29 the dashboard keeps its theme under another key and name
        tab.evaluate(f"localStorage.setItem('uiTheme', {json.dumps(LEGACY_THEMES[theme])}); true")


def open_review_page(bot, tab: Tab, locale: str = "en-US", theme: str = "light") -> None:
    log_in(bot, tab, locale, theme)
    tab.navigate(bot.url + VIEW)
    tab.wait(tab.find_frame, "the plugin iframe of the review page", timeout=30)
    state = tab.wait(lambda: tab.frame("document.querySelector('#app')?.getAttribute('data-ready')"),
                     "the review page to load", timeout=30)
    assert state == "1", tab.frame("document.querySelector('#notice').textContent")


@contextlib.contextmanager
def screenshot_on_failure(tab: Tab, name: str) -> Iterator[None]:
    """A picture of the page in tests/artifacts/``name`` when the block fails."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            tab.screenshot(ARTIFACTS / name)
        raise
