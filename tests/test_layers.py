"""The core's layers (docs/architecture.md#layers): every import runs down
a floor, with no loop, but the exceptions listed there with their reason."""

from __future__ import annotations

from devtools.floors import EXCEPTIONS, arrows, back_up, floors


def test_the_core_has_no_import_loop_and_no_import_back_up_but_the_listed_ones():
    graph = arrows()
    floor, loops = floors(graph)
    assert loops == []
    assert back_up(graph, floor) == []


def test_every_listed_exception_is_an_import_the_code_still_makes():
    graph = arrows()
    assert [pair for pair in EXCEPTIONS if pair[1] not in graph.get(pair[0], set())] == []


def test_the_doors_stand_above_the_engine_and_the_settings_below_everything_that_reads_them():
    graph = arrows()
    floor, _ = floors(graph)
    assert floor["doors/"] == max(floor.values()) and floor["doors/"] > floor["engine"] > floor["operating/"]
    assert not any("doors/" in targets for room, targets in graph.items() if room != "doors/")
    assert floor["errors"] < floor["validators"] < floor["config"] < floor["scope"]


def test_a_core_module_over_400_lines_says_at_its_top_why():
    from pathlib import Path

    core = Path(__file__).resolve().parent.parent / "astrbot_plugin_ltm"
    long_ones = [path for path in core.rglob("*.py")
                 if path.parent.name != "i18n" and len(path.read_text(encoding="utf-8").splitlines()) > 400]
    unexplained = [str(path.relative_to(core)) for path in long_ones
                   if "Over 400 lines:" not in path.read_text(encoding="utf-8").split('"""')[1]]
    assert unexplained == []
