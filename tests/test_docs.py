"""The documentation says what the code does: the settings page is generated
from the settings form, every route is documented, every pointer into
docs/decisions.md lands, the READMEs start with the two commands and link
only inside the repository, and their removal commands remove everything."""

from __future__ import annotations

import re
import sqlite3
import subprocess
from pathlib import Path

import pytest

import dashboard_routes
from astrbot_plugin_ltm.storing.migrate import migrate
from devtools import config_docs

REPO = Path(__file__).resolve().parent.parent
READMES = [REPO / "README.md", REPO / "README_en.md"]
DOCS = sorted((REPO / "docs").glob("*.md")) + [REPO / "CHANGELOG.md", REPO / "bench" / "README.md", *READMES]


def test_the_configuration_page_is_what_the_settings_form_says():
    assert (REPO / "docs" / "configuration.md").read_text(encoding="utf-8") == config_docs.render(), (
        "docs/configuration.md is out of date: run python -m devtools.config_docs")


def test_every_setting_of_the_form_is_on_the_configuration_page():
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    for path in ("write_policy.mode", "read_policy.day_weight", "vectors.embed_turns", "retention_days.episode",
                 "identity.cross_platform_aliases", "emergency_read_only"):
        assert f"### `{path}`" in page, path


def test_every_registered_route_and_method_is_documented():
    rows = {}
    for line in (REPO / "docs" / "api.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`") and cells[0].endswith("`"):
            rows.setdefault(cells[0].strip("`"), set()).add(cells[1])
    registered = dashboard_routes.routes(lambda: None)
    assert registered
    for route, _, methods, _ in registered:
        name = route.removeprefix(f"/{dashboard_routes.PLUGIN}/")
        for method in methods:
            assert method in rows.get(name, set()), f"{method} {name} is not in docs/api.md"


def test_every_pointer_into_the_decisions_lands_on_an_entry():
    decisions = (REPO / "docs" / "decisions.md").read_text(encoding="utf-8")
    anchors = set(re.findall(r'<a id="(d\d{2,3})"></a>', decisions))
    sources = [*REPO.glob("astrbot_plugin_ltm/**/*.py"), *REPO.glob("migrations/*.py"), *REPO.glob("bench/*.py")]
    pointers = {(path.name, anchor) for path in sources
                for anchor in re.findall(r"docs/decisions\.md#(d\d{2,3})\b", path.read_text(encoding="utf-8"))}
    assert len(pointers) > 20  # the code does point here
    assert {anchor for _, anchor in pointers} <= anchors, sorted(p for p in pointers if p[1] not in anchors)
    headings = re.findall(r"^## (D\d{2,3}) ", decisions, re.M)
    in_order = sorted(anchors, key=lambda a: int(a[1:]))  # d99 before d100
    assert [h.lower() for h in headings] == in_order and len(headings) == len(set(headings))


def test_every_decision_is_listed_under_its_area():
    decisions = (REPO / "docs" / "decisions.md").read_text(encoding="utf-8")
    by_area = decisions.split("## By area", 1)[1].split('<a id="d', 1)[0]
    listed = re.findall(r"\[(D\d{2,3})\]\(#(d\d{2,3})\)", by_area)
    assert all(label.lower() == anchor for label, anchor in listed)
    assert sorted(label for label, _ in listed) == sorted(re.findall(r"^## (D\d{2,3}) ", decisions, re.M))


def test_the_architecture_is_a_short_map_naming_every_module():
    architecture = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert len(architecture.encode()) <= 15_000, "a map read in ten minutes: details go to the area pages"
    layout = set(re.findall(r"\w+\.py", architecture.split("```")[1]))
    modules = [path for path in (REPO / "astrbot_plugin_ltm").rglob("*.py")
               if path.name != "__init__.py" and path.parent.name != "i18n"]  # i18n/: one area a module
    assert [str(p.relative_to(REPO)) for p in modules if p.name not in layout] == []
    for page in re.findall(r"\]\((\w+\.md)\)", architecture.split("## Where to read on")[1]):
        assert (REPO / "docs" / page).is_file()


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.name)
def test_a_readme_starts_with_the_two_commands_and_is_for_the_people_who_install(readme):
    text = readme.read_text(encoding="utf-8")
    first_block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert first_block and text.index("```bash") < 800, "the two commands come first"
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["./scripts/run.sh --offline-demo", "./scripts/test.sh"]
    # short enough to read before installing (9,000 until the install section had to say how to
    # recover from a failed dependency install and the demo's port and home)
    assert 5_000 <= len(text.encode()) <= 9_500
    for needed in ("shadow", "/ltm forget-all", "data/data_v4.db", "bench/README.md", "docs/configuration.md"):
        assert needed in text, needed
    assert "../" not in text, "nothing outside the repository"


def test_ci_runs_the_readmes_test_command():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "./scripts/test.sh" in ci
    script = (REPO / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "ruff check" in script and "mypy" in script and "pytest" in script


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_links_in_the_documentation_stay_in_the_repository_and_lead_somewhere(doc):
    text = doc.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://", "#")):
            continue
        path = (doc.parent / target.split("#")[0]).resolve()
        assert path.is_relative_to(REPO), f"{target} leaves the repository"
        assert path.exists(), f"{target} does not exist"


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.name)
def test_the_readmes_removal_commands_remove_every_table_of_the_plugin_and_nothing_else(readme, tmp_path):
    db = tmp_path / "data" / "data_v4.db"
    db.parent.mkdir()
    migrate(str(db))
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE astrbot_own (x)")
    (tmp_path / "data" / "plugin_data" / "astrbot_plugin_ltm" / "vectors").mkdir(parents=True)
    block = re.search(r"```bash\n(sqlite3 data/data_v4\.db .*?)```", readme.read_text(encoding="utf-8"), re.S)
    assert block
    subprocess.run(["bash", "-euc", block.group(1)], cwd=tmp_path, check=True)
    with sqlite3.connect(db) as conn:
        # SQLite's own bookkeeping (sqlite_sequence) is not a table of anyone's
        tables = {name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
    assert tables == {"astrbot_own"}
    assert not (tmp_path / "data" / "plugin_data" / "astrbot_plugin_ltm").exists()
