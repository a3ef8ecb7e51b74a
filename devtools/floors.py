"""The core's floors, from its own imports: ``python -m devtools.floors``.

A room is a top-level module or folder of astrbot_plugin_ltm; it stands one
floor above the highest room it imports (imports under TYPE_CHECKING
included). Prints the floors from the bottom, then any import loop between
rooms and any arrow that runs back up, other than the exceptions that
docs/architecture.md#layers lists with their reason (EXCEPTIONS). The
tests (tests/test_layers.py) hold the core to it.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

PACKAGE = "astrbot_plugin_ltm"
ROOT = Path(__file__).resolve().parent.parent
# (room, room): imports that run back up on purpose, each with its reason in
# docs/architecture.md#layers.
EXCEPTIONS = {("extension_points", "learning/")}  # Extractor's result types, for type checking only

Arrows = dict[str, set[str]]


def _room(parts: list[str], package: Path) -> str | None:
    """The room of the module ``astrbot_plugin_ltm.<parts>``."""
    if not parts:
        return None
    return f"{parts[0]}/" if (package / parts[0]).is_dir() else parts[0]


def _exists(parts: list[str], package: Path) -> bool:
    target = package.joinpath(*parts)
    return target.is_dir() or target.with_suffix(".py").is_file()


def arrows(root: Path = ROOT) -> Arrows:
    """room -> the rooms it imports."""
    package = root / PACKAGE
    out: Arrows = defaultdict(set)
    for path in package.rglob("*.py"):
        here = list(path.relative_to(package).with_suffix("").parts)
        folder = here[:-1]  # a module's relative imports start from its folder
        source = _room(here if here[-1] != "__init__" else folder, package)
        if source is None:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[list[str]] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = folder[: len(folder) - (node.level - 1)] if node.level > 1 else folder
                else:
                    if not (node.module or "").startswith(PACKAGE):
                        continue
                    base = []
                module = (node.module or "").split(".") if node.module else []
                if not node.level:
                    module = module[1:]
                targets = [base + module + [alias.name] for alias in node.names] + [base + module]
            elif isinstance(node, ast.Import):
                targets = [alias.name.split(".")[1:] for alias in node.names if alias.name.startswith(f"{PACKAGE}.")]
            for parts in targets:
                room = _room(parts, package) if parts and _exists(parts, package) else None
                if room is not None and room != source:
                    out[source].add(room)
    return out


def floors(graph: Arrows) -> tuple[dict[str, int], list[list[str]]]:
    """Each room's floor, and the loops (rooms that import each other), with
    EXCEPTIONS left out; a loop's rooms share a floor."""
    rooms = set(graph) | {r for targets in graph.values() for r in targets}
    down = {a: {b for b in graph.get(a, ()) if (a, b) not in EXCEPTIONS} for a in rooms}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[set[str]] = []

    def visit(room: str) -> None:  # Tarjan: the strongly connected rooms
        index[room] = low[room] = len(index)
        stack.append(room)
        for other in down[room]:
            if other not in index:
                visit(other)
                low[room] = min(low[room], low[other])
            elif other in stack:
                low[room] = min(low[room], index[other])
        if low[room] == index[room]:
            loop = set()
            while True:
                member = stack.pop()
                loop.add(member)
                if member == room:
                    break
            loops.append(loop)

    sys.setrecursionlimit(max(1000, 10 * len(rooms)))
    for room in sorted(rooms):
        if room not in index:
            visit(room)
    loop_of = {room: i for i, loop in enumerate(loops) for room in loop}
    floor_of: dict[int, int] = {}
    for i, loop in enumerate(loops):  # Tarjan closes a loop after every loop it reaches
        below = {loop_of[b] for a in loop for b in down[a]} - {i}
        floor_of[i] = 1 + max((floor_of[j] for j in below), default=0)
    return {room: floor_of[loop_of[room]] for room in rooms}, [sorted(loop) for loop in loops if len(loop) > 1]


def back_up(graph: Arrows, floor: dict[str, int]) -> list[tuple[str, str]]:
    """Arrows from a room to one on its own floor or above, but the EXCEPTIONS."""
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if (a, b) not in EXCEPTIONS and floor[b] >= floor[a])


def main() -> int:
    graph = arrows()
    floor, loops = floors(graph)
    for level in sorted(set(floor.values())):
        print(f"floor {level:2}  " + ", ".join(sorted(r for r in floor if floor[r] == level)))
    print("loops:", loops or "none")
    print("arrows back up:", back_up(graph, floor) or "none", "| exceptions:", sorted(EXCEPTIONS))
    return 1 if loops or back_up(graph, floor) else 0


if __name__ == "__main__":
    raise SystemExit(main())
