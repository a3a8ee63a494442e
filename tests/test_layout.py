"""The house's floors: imports run down, never back up, and no module imports itself through others.

``quarto_env`` (the rules and the envs) is the ground floor, ``agents`` the first, ``experiments`` the top. Inside
``experiments`` the rooms have floors of their own (:data:`ROOM_FLOOR`): the shared modules beside ``cli.py``, then
``evaluation`` (the games, grading and ratings that training and the arena share), then ``training``, ``arena`` and
``probe`` side by side -- none imports another -- then ``bench``, which measures them all, and ``cli.py`` on top.
``agents`` has rooms too (:data:`AGENT_ROOM_FLOOR`): on the ground the agent interface and the few modules every
room stands on (:data:`AGENT_GROUND`) beside ``storage``; above them ``solver``, ``tree`` and ``networks`` side by
side, none importing another; then the players, directly in ``agents/`` (the specs, the trained agents, the suites,
which play games between agents named by specs); and ``envs``, the environments against an agent named by a spec,
on top. The JAX core is rules, so it lives on the ground floor, in ``quarto_env.jax``; its network is in
``agents.networks``, beside the torch ones.
Every import statement of the three packages counts -- inside functions too, where an import hides from a
reader -- except those under ``if TYPE_CHECKING:``, which never run. Names loaded from strings
(``importlib.import_module``, the agent registry, the command table) are not imports: they are how an upper
floor is named without being imported.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("quarto_env", "agents", "experiments")
FLOOR = {package: floor for floor, package in enumerate(PACKAGES)}
SHARED_MODULES_BESIDE_CLI = 3
"""The most modules directly in ``experiments/`` besides ``cli.py`` and ``__init__.py``."""
ROOM_FLOOR = {"evaluation": 1, "training": 2, "arena": 2, "probe": 2, "bench": 3}
"""The floor of each room (package) of ``experiments``: the shared modules beside ``cli.py`` are floor 0, ``cli.py``
above every room. A room imports only rooms on lower floors: rooms on one floor never import each other."""
CLI_FLOOR = max(ROOM_FLOOR.values()) + 1
AGENT_ROOM_FLOOR = {"storage": 0, "solver": 1, "tree": 1, "networks": 1, "envs": 3}
"""The floor of each room (package) of ``agents``; the players directly in ``agents/`` are on floor
:data:`AGENT_PLAYERS_FLOOR`, but the :data:`AGENT_GROUND` modules, on floor 0."""
AGENT_GROUND = frozenset({"base", "match", "simple", "interrupts"})
"""The modules directly in ``agents/`` that the rooms stand on: the agent interface, a game between agents, the
simplest agents (which sample positions for the solver) and the stopping of compiled searches."""
AGENT_PLAYERS_FLOOR = 2
MOST_AGENT_MODULES_ON_TOP = 12
"""The most modules directly in ``agents/``, ``__init__.py`` included: the rest live in rooms."""


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The project's modules that ``path`` imports, anywhere in the file but under ``if TYPE_CHECKING:``."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)  # `from pkg import module`
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return {name for name in found if name in modules}


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    names = set(modules)
    return {name: imported_modules(path, names) - {name} for name, path in modules.items()}


def test_the_graph_sees_function_level_imports() -> None:
    """The control: the labeller's lazy import of the solver, and the command table's targets' absence."""
    graph = import_graph()
    assert "agents.solver.minimax" in graph["agents.solver.labels"]  # imported inside a function
    assert not any(name.startswith("experiments.training") for name in graph["experiments.cli"])  # by string only


@pytest.mark.parametrize("package", PACKAGES[:2])
def test_no_import_runs_back_up(package: str) -> None:
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        if module.split(".")[0] == package
        for target in targets
        if FLOOR[target.split(".")[0]] > FLOOR[package]
    )
    assert not upward, f"{package} must import nothing above it: " + "; ".join(upward)


def room_floor(module: str) -> tuple[str, int]:
    """The room of an ``experiments`` module (``experiments.training.run``: ``training``) and its floor
    (:data:`ROOM_FLOOR`); the modules directly in ``experiments`` share the room ``""`` on floor 0, but ``cli``,
    on top."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and parts[1] in ROOM_FLOOR):
        return parts[1], ROOM_FLOOR[parts[1]]
    return ("cli", CLI_FLOOR) if parts[-1] == "cli" else ("", 0)


def imports_across_rooms(
    graph: dict[str, set[str]],
    package: str = "experiments",
    floor_of: Callable[[str], tuple[str, int]] = room_floor,
) -> list[str]:
    """The imports between two rooms of ``package`` (their room and floor by ``floor_of``) that do not run down: to
    a room on the same floor or above. The package itself, which every import of a submodule runs, is no room."""
    wrong = []
    for module, targets in graph.items():
        if not module.startswith(f"{package}."):
            continue
        room, floor = floor_of(module)
        for target in targets:
            if target.startswith(f"{package}."):
                target_room, target_floor = floor_of(target)
                if target_room != room and target_floor >= floor:
                    wrong.append(f"{module} imports {target}")
    return sorted(wrong)


def test_imports_across_rooms_finds_a_sideways_and_an_upward_one() -> None:
    """The control: training and the arena are side by side, evaluation under both."""
    graph = {
        "experiments.training.run": {"experiments.arena.grade", "experiments.evaluation.games", "experiments.options"},
        "experiments.evaluation.grading": {"experiments.training.config", "experiments.options"},
        "experiments.bench.az": {"experiments.training.config"},
        "experiments.cli": {"experiments.options"},
    }
    assert imports_across_rooms(graph) == [
        "experiments.evaluation.grading imports experiments.training.config",
        "experiments.training.run imports experiments.arena.grade",
    ]


def test_experiments_rooms_import_only_rooms_below() -> None:
    wrong = imports_across_rooms(import_graph())
    assert not wrong, "an experiments room imports one beside or above it: " + "; ".join(wrong)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports in ``graph`` as a list of modules (the first repeated at the end), or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def agent_room_floor(module: str) -> tuple[str, int]:
    """The room of an ``agents`` module (``agents.solver.book``: ``solver``) and its floor: the players directly in
    ``agents/`` share the room ``""``, the ground modules the room ``"ground"`` (:data:`AGENT_GROUND`)."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and parts[1] in AGENT_ROOM_FLOOR):
        return parts[1], AGENT_ROOM_FLOOR[parts[1]]
    if parts[-1] in AGENT_GROUND:
        return "ground", 0
    return "", AGENT_PLAYERS_FLOOR


def test_agent_imports_across_rooms_finds_a_sideways_and_an_upward_one() -> None:
    """The control: the solver and the tree searches side by side, the specs above both."""
    graph = {
        "agents.tree.sessions": {"agents.solver.book", "agents.match"},
        "agents.solver.suites": {"agents.specs", "agents.storage.files"},
        "agents.specs": {"agents.base"},
    }
    assert imports_across_rooms(graph, "agents", agent_room_floor) == [
        "agents.solver.suites imports agents.specs",
        "agents.tree.sessions imports agents.solver.book",
    ]


def test_agents_rooms_import_only_rooms_below() -> None:
    wrong = imports_across_rooms(import_graph(), "agents", agent_room_floor)
    assert not wrong, "an agents room imports one beside or above it: " + "; ".join(wrong)


def test_agents_has_its_rooms_and_few_modules_on_top() -> None:
    folder = REPO / "agents"
    rooms = sorted(p.name for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert rooms == sorted(AGENT_ROOM_FLOOR)
    on_top = sorted(p.name for p in folder.glob("*.py"))
    assert len(on_top) <= MOST_AGENT_MODULES_ON_TOP, f"too many modules directly in agents/: {on_top}"
    assert all((folder / f"{name}.py").exists() for name in AGENT_GROUND)


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_circle_of_imports() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "a circle of imports: " + " -> ".join(cycle or [])


def test_experiments_has_its_rooms_and_few_shared_modules() -> None:
    folder = REPO / "experiments"
    rooms = sorted(p.name for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert rooms == sorted(ROOM_FLOOR)
    shared = sorted(p.name for p in folder.glob("*.py") if p.name not in ("__init__.py", "cli.py"))
    assert len(shared) <= SHARED_MODULES_BESIDE_CLI, f"too many shared modules beside cli.py: {shared}"


def test_the_checkpoint_format_and_the_other_agents_need_no_stable_baselines3() -> None:
    """Playing an ``az:`` or ``rllib:`` checkpoint loads torch, not stable-baselines3 (nor ray): the checkpoint
    format and the networks live apart from the MaskablePPO agent."""
    import subprocess
    import sys

    modules = [
        "agents.networks.checkpoints",
        "agents.networks.policy_value",
        "agents.tree.puct",
        "agents.alphazero",
        "agents.rllib",
    ]
    heavy = "{'stable_baselines3', 'sb3_contrib', 'ray'}"
    probe = f"import sys, {', '.join(modules)}; print(sorted({heavy} & set(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO)
    assert loaded.stdout.strip() == "[]"
    control = subprocess.run(
        [sys.executable, "-c", "import sys, agents.ppo; print('stable_baselines3' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    assert control.stdout.strip() == "True"


def test_the_evaluation_library_reads_no_command_line() -> None:
    """The evaluation room's library takes plain values and raises; the options of the commands that grade live
    apart, in ``experiments.evaluation.arguments``, which only commands import."""
    graph = import_graph()
    modules = project_modules()
    readers = sorted(
        module
        for module, path in modules.items()
        if module.startswith("experiments.evaluation.")
        and module != "experiments.evaluation.arguments"
        and ("argparse" in path.read_text() or "experiments.options" in graph[module])
    )
    assert readers == []
    importers = sorted(m for m, targets in graph.items() if "experiments.evaluation.arguments" in targets)
    assert importers and all(not m.startswith("experiments.evaluation.") for m in importers), importers
