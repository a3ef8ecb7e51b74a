"""The plugin as AstrBot's plugin market lists it (the market's spec of
2026-06-27; AstrBot's plugin docs): ``metadata.yaml`` in Chinese for the
market's readers with English in its ``i18n``, the platforms it supports,
a 256×256 ``logo.png``, a version that is CHANGELOG.md's newest, and a
package within the market's 16 MB."""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import re
import struct
import subprocess
import zipfile
from pathlib import Path

import yaml  # type: ignore[import-untyped]  # AstrBot's dependency; no stubs in the venv

from devtools.astrbot_home import PLUGIN_FILES

REPO = Path(__file__).resolve().parent.parent
I18N = REPO / ".astrbot-plugin" / "i18n"
HAN = re.compile(r"[\u4e00-\u9fff]")
REPO_URL = re.compile(r"^https://github\.com/[A-Za-z0-9_-]+/[A-Za-z0-9_-]+$")  # the spec's 7.1
MAX_PACKAGE_BYTES = 16 * 1024 * 1024
SHOWN = ("display_name", "desc", "short_desc")


def metadata() -> dict:
    return yaml.safe_load((REPO / "metadata.yaml").read_text(encoding="utf-8"))


def plugin_i18n(locale: str) -> dict:
    return json.loads((I18N / f"{locale}.json").read_text(encoding="utf-8"))["metadata"]


def adapters() -> set[str]:
    """ADAPTER_NAME_2_TYPE's keys in the installed AstrBot, read from its
    source (importing AstrBot's core writes a config: not in a unit test)."""
    spec = importlib.util.find_spec("astrbot")
    assert spec is not None and spec.origin is not None
    source = Path(spec.origin).parent / "core" / "star" / "filter" / "platform_adapter_type.py"
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "ADAPTER_NAME_2_TYPE" for t in node.targets):
            assert isinstance(node.value, ast.Dict)
            return {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    raise AssertionError(f"no ADAPTER_NAME_2_TYPE in {source}")


def test_the_required_fields_are_there_as_the_market_and_astrbot_check_them():
    meta = metadata()
    for field in ("name", "desc", "version", "author", "repo"):  # AstrBot's required four, and the market's repo
        assert isinstance(meta.get(field), str) and meta[field].strip() == meta[field] != "", field
    assert meta["name"] == "astrbot_plugin_ltm" and "/" not in meta["name"] and "/" not in meta["author"]
    assert REPO_URL.match(meta["repo"]), meta["repo"]
    assert re.fullmatch(r">=\d+\.\d+\.\d+,<\d+\.\d+", meta["astrbot_version"])


def test_the_listing_is_chinese_with_english_in_the_markets_i18n():
    meta = metadata()
    for field in SHOWN:
        assert HAN.search(meta[field]), f"{field} is not Chinese: the market's readers read Chinese"
    assert set(meta["i18n"]) == {"zh-CN", "en-US"}
    assert {f: meta[f] for f in SHOWN} == meta["i18n"]["zh-CN"]
    assert all(set(meta["i18n"][locale]) == set(SHOWN) for locale in meta["i18n"])
    assert not any(HAN.search(meta["i18n"]["en-US"][f]) for f in SHOWN), "en-US is not English"
    # AstrBot's own plugin page reads .astrbot-plugin/i18n: the same texts
    for locale in ("zh-CN", "en-US"):
        assert plugin_i18n(locale) == meta["i18n"][locale], locale
    assert len(meta["short_desc"]) <= 40  # the compact card


def test_the_supported_platforms_are_astrbots_adapters():
    platforms = metadata()["support_platforms"]
    assert isinstance(platforms, list) and platforms and all(isinstance(p, str) for p in platforms)
    assert len(set(platforms)) == len(platforms)
    known = adapters()
    assert set(platforms) <= known, sorted(set(platforms) - known)
    assert {"aiocqhttp", "qq_official", "telegram", "webchat"} <= set(platforms)


def test_the_version_is_the_changelogs_newest_release():
    version = metadata()["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
    headings = re.findall(r"^## (.+)$", (REPO / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert headings[0] == version, (
        f"CHANGELOG.md's newest section is {headings[0]!r}, metadata.yaml says {version!r}: what ships is "
        "released under metadata.yaml's version (bump it and name the section), or the market offers no update")
    released = [tuple(map(int, h.split("."))) for h in headings if re.fullmatch(r"\d+\.\d+\.\d+", h)]
    assert released == sorted(released, reverse=True) and len(set(released)) == len(released)


def test_the_logo_is_a_256_pixel_square_png():
    data = (REPO / "logo.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (256, 256)
    assert len(data) < 200_000
    assert "logo.png" in PLUGIN_FILES  # installed with the plugin: AstrBot's plugin page shows it


def package_files() -> list[Path]:
    """What a zip of the repository holds: the files git tracks (the market
    zips the repository), else every file but the local ones."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
        return [REPO / name for name in listed.decode().split("\0") if name and (REPO / name).is_file()]
    except (OSError, subprocess.CalledProcessError):
        local = {".git", ".venv", ".astrbot-home", "__pycache__", "artifacts", ".mypy_cache", ".ruff_cache",
                 ".pytest_cache"}
        return [p for p in REPO.rglob("*") if p.is_file() and not local & set(p.relative_to(REPO).parts)]


def test_the_plugin_zip_is_within_the_markets_16_mb():
    files = package_files()
    names = {p.relative_to(REPO).as_posix() for p in files}
    assert {"metadata.yaml", "logo.png", "main.py", "requirements.txt"} <= names
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as package:
        for path in files:
            package.write(path, f"astrbot_plugin_ltm/{path.relative_to(REPO).as_posix()}")
    size = buffer.getbuffer().nbytes
    assert size < MAX_PACKAGE_BYTES, f"the plugin zip is {size / 1e6:.1f} MB; the market refuses more than 16 MB"
