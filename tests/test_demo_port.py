"""The demo's dashboard port (devtools/demo.py): never AstrBot's own 6185 by
default, a free one when the default is taken, and a port asked for is
used as asked or refused with a clear message."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from devtools import demo


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_the_demos_default_port_is_not_astrbots_own():
    assert demo.DEFAULT_PORT != 6185


def test_a_taken_default_port_gives_way_to_a_free_one(monkeypatch, taken_port, capsys):
    monkeypatch.setattr(demo, "DEFAULT_PORT", taken_port)
    monkeypatch.setattr(demo, "LANG", "en")
    port = demo.dashboard_port(None)
    assert port != taken_port and demo.port_free(port)
    assert f"port {taken_port} is taken; using {port}" in capsys.readouterr().out
    monkeypatch.setattr(demo, "LANG", "zh")  # the README's language
    port = demo.dashboard_port(None)
    assert f"端口 {taken_port} 已被占用，改用 {port}" in capsys.readouterr().out


def test_a_port_asked_for_that_is_taken_stops_the_demo_with_a_clear_message(monkeypatch, taken_port):
    monkeypatch.setattr(demo, "LANG", "en")
    with pytest.raises(SystemExit, match=f"port {taken_port} is taken; choose another"):
        demo.dashboard_port(taken_port)
    monkeypatch.setattr(demo, "LANG", "zh")
    with pytest.raises(SystemExit, match=f"端口 {taken_port} 已被占用；请用 --port 或 LTM_DEMO_PORT 换一个"):
        demo.dashboard_port(taken_port)
