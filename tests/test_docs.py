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
DOCS = (sorted((REPO / "docs").glob("*.md")) + [REPO / "CHANGELOG.md", REPO / "bench" / "README.md", *READMES]
        + sorted((REPO / "bench" / "results").glob("*.md")))


def test_the_configuration_page_is_what_the_settings_form_says():
    assert (REPO / "docs" / "configuration.md").read_text(encoding="utf-8") == config_docs.render(), (
        "docs/configuration.md is out of date: run python -m devtools.config_docs")


def test_every_setting_of_the_form_is_on_the_configuration_page():
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    for path in ("write_policy.mode", "read_policy.max_events", "vectors.embed_turns", "retention_days.episode",
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


# where anything may point into the decisions: the code, the tests, the tools, the page and the docs
POINTING = ["astrbot_plugin_ltm/**/*.py", "migrations/*.py", "bench/*.py", "tests/**/*.py", "devtools/**/*.py",
            "*.py", "pages/**/*.js", "pages/**/*.html", "docs/*.md", "bench/**/*.md", "*.md"]


def decision_entries(decisions: str) -> list[tuple[list[str], str, str]]:
    """Each entry: its anchors (an entry that took in others keeps theirs), its heading and its text."""
    entries = []
    for chunk in re.split(r"\n\n(?=(?:<a id=\"d\d+\"></a>\n)+## D)", decisions)[1:]:
        anchors = re.findall(r'^<a id="(d\d+)"></a>$', chunk, re.M)
        heading = re.search(r"^## (.*)$", chunk, re.M)
        assert anchors and heading, chunk[:200]
        entries.append((anchors, heading.group(1), chunk[heading.end():]))
    return entries


def test_every_pointer_into_the_decisions_lands_on_an_entry():
    decisions = (REPO / "docs" / "decisions.md").read_text(encoding="utf-8")
    anchors = re.findall(r'<a id="(d\d\d+)"></a>', decisions)
    assert len(anchors) == len(set(anchors)), "an anchor is set twice"
    sources = {path for pattern in POINTING for path in REPO.glob(pattern) if ".venv" not in path.parts}
    pointers = {(path.name, anchor) for path in sources
                for anchor in re.findall(r"decisions\.md#(d\d\d+)", path.read_text(encoding="utf-8"))}
    assert len({p for p in pointers if p[0].endswith(".py")}) > 20  # the code does point here
    assert {anchor for _, anchor in pointers} <= set(anchors), sorted(p for p in pointers if p[1] not in anchors)
    entries = decision_entries(decisions)
    assert sum(len(a) for a, _, _ in entries) == len(anchors), "an anchor outside an entry"
    for entry_anchors, heading, _ in entries:
        # the heading names every decision the entry holds, in its anchors' order
        assert heading.split(" · ")[0].split(", ") == [a.upper() for a in entry_anchors], heading
    firsts = [int(a[0][1:]) for a, _, _ in entries]
    assert firsts == sorted(firsts), "entries in the order of their first number (d93 before d104)"


def test_every_decision_is_listed_under_its_area():
    decisions = (REPO / "docs" / "decisions.md").read_text(encoding="utf-8")
    by_area = decisions.split("## By area", 1)[1].split('<a id="d', 1)[0]
    listed = re.findall(r"\[(D\d\d+)\]\(#(d\d\d+)\)", by_area)
    assert all(label.lower() == anchor for label, anchor in listed)
    # every decision, those an entry took in too, under the area of its entry
    assert sorted(anchor for _, anchor in listed) == sorted(a for anchors, _, _ in decision_entries(decisions)
                                                            for a in anchors)


# a decision reads at a glance: what we chose and why; its tables, commands and variants are in its record
# (while one is kept) or in a report under bench/results/
DECISION_LINES = 7
DECISIONS_BYTES = 40_000
RECORDS_BYTES = 100_000
BENCH_README_BYTES = 25_000


def test_every_decision_is_a_few_lines_linking_the_records_it_has():
    decisions = (REPO / "docs" / "decisions.md").read_text(encoding="utf-8")
    records = (REPO / "docs" / "decision-records.md").read_text(encoding="utf-8")
    record_headings = dict(re.findall(r'<a id="(r\d\d+)"></a>\n## (D\d\d+) ', records))
    assert len(record_headings) == len(re.findall(r'<a id="r\d+"></a>', records)), "a record without its heading"
    assert all(f"d{number[1:]}" == f"d{record[1:]}".lower() for record, number in record_headings.items())
    entries = decision_entries(decisions)
    assert len(entries) > 60
    linked = set()
    for anchors, heading, text in entries:
        lines = [line for line in text.splitlines() if line.strip()]
        assert len(lines) <= DECISION_LINES, f"{heading}: {len(lines)} lines; the detail goes to its record"
        links = set(re.findall(r"\]\(decision-records\.md#(r\d\d+)\)", text))
        has = {f"r{a[1:]}" for a in anchors} & set(record_headings)
        assert has <= links, f"{heading} does not link its records {sorted(has - links)}"
        assert links <= has, f"{heading} links records not its own {sorted(links - has)}"
        linked |= links
    assert linked == set(record_headings), f"records no entry links: {sorted(set(record_headings) - linked)}"


def test_the_decisions_their_records_and_the_benchmarks_page_stay_short():
    assert len((REPO / "docs" / "decisions.md").read_bytes()) <= DECISIONS_BYTES
    assert len((REPO / "docs" / "decision-records.md").read_bytes()) <= RECORDS_BYTES, "history is in git"
    assert len((REPO / "bench" / "README.md").read_bytes()) <= BENCH_README_BYTES, "dated sections go to results/"


def test_the_benchmarks_page_says_how_to_run_each_one_and_gives_one_table_of_figures():
    bench = (REPO / "bench" / "README.md").read_text(encoding="utf-8")
    assert not re.search(r"^#+ .*\(\d{4}-\d\d-\d\d\)", bench, re.M), "a dated section belongs in bench/results/"
    figures = bench.split('<a id="figures"></a>', 1)[1].split("\n## ", 2)[1]
    rows = [line for line in figures.splitlines() if line.startswith("| ") and not line.startswith("| what")]
    assert len(re.findall(r"^\|---", bench, re.M)) == 1, "one table of figures"
    assert len(rows) > 10 and all("`bench." in row and "20" in row for row in rows), "each figure: command, date"
    reports = sorted(p.name for p in (REPO / "bench" / "results").glob("*.md"))
    assert reports and all(re.fullmatch(r"\d{4}-\d\d-\d\d-[a-z0-9-]+\.md", name) for name in reports)
    assert [name for name in reports if f"(results/{name})" not in bench] == [], "every report is listed"


@pytest.mark.parametrize("page", sorted((REPO / "docs").glob("*.md")), ids=lambda p: p.name)
def test_a_page_opens_with_its_introduction(page):
    lines = [line for line in page.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert lines[0].startswith("# ") and not lines[1].startswith("#"), "a section added on top of the page"


def test_every_link_to_a_decision_record_or_a_bench_section_lands():
    bench = (REPO / "bench" / "README.md").read_text(encoding="utf-8")
    records = (REPO / "docs" / "decision-records.md").read_text(encoding="utf-8")
    anchors = {"decision-records.md": set(re.findall(r'<a id="([\w-]+)"></a>', records)),
               "README.md": set(re.findall(r'<a id="([\w-]+)"></a>', bench))}
    linked = [(Path(target).name, anchor) for doc in DOCS
              for target, anchor in re.findall(r"\]\(([^)#\s]*(?:decision-records|README)\.md)#([\w-]+)\)",
                                               doc.read_text(encoding="utf-8"))
              if Path(target).name in anchors and (doc.parent / target).resolve().parent.name in ("docs", "bench")]
    assert len(linked) > 60
    assert [link for link in linked if link[1] not in anchors[link[0]]] == []


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
