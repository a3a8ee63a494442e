"""The error contract (issue 51, item 3): one place lists every error class, and a library raise is a
``QuartoError`` or says why not.

- **One list.** :mod:`quarto_env.errors`'s docstring draws every exception class that ``quarto_env``, ``agents`` and
  ``experiments`` define: the ``QuartoError`` tree, then the few signals that are not errors (:data:`SIGNALS`).
  Each class's parents in the source are the tree's, and each lives in ``quarto_env.errors`` unless its line
  names another home. A class added elsewhere, or a parent changed, fails here until the docstring says so.
- **No bare built-in raise.** ``raise ValueError(...)`` and its kind in library code are ``QuartoError``
  subclasses (``QuartoValueError`` is a ``ValueError`` too), but those :data:`KEPT_RAISES` keeps, each with its
  reason, and the kinds that are protocols rather than errors (:data:`PROTOCOL_RAISES`).

Both read the source (``ast``), not the imported modules: importing every module of the three packages loads
torch, Ray and JAX and takes minutes, and a module whose extra is missing would be skipped.
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import quarto_env.errors
from quarto_env.errors import QuartoError

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("quarto_env", "agents", "experiments")
ERRORS_MODULE = "quarto_env.errors"
BUILT_IN_EXCEPTIONS = {
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
}
OUTSIDE_EXCEPTION = re.compile(r"(Error|Exception|Interrupt|Exit|Warning)$")
"""A base from outside the project (``yaml.YAMLError``) counts as an exception by its name: the source is read,
not imported."""

SIGNALS = {
    # Ctrl-C itself: a KeyboardInterrupt, so that whatever lets Ctrl-C through lets it through.
    "AlphaBetaInterrupted",
    # Ctrl-C in quarto train, caught by train's main, which prints how to resume.
    "TrainingInterrupted",
    # A resume with nothing left to do: caught by train's main, which prints the final table (exit 0).
    "RunFinished",
    # The player of quarto play quit or the input ended: caught by the game loop.
    "QuitGame",
    # A YAML bomb: a yaml.YAMLError, so the config reader's YAML handling reports it as the bad YAML it is.
    "TooManyValues",
}
"""The exception classes that are not ``QuartoError`` subclasses, on purpose: signals that stop a loop, each caught
by the code it leaves. The docstring lists them apart from the tree."""

PROTOCOL_RAISES = {
    "NotImplementedError": "an abstract method, or a framework hook this class does not serve",
    "AttributeError": "the attribute protocol: hasattr, getattr's default and PEP 562 rely on it",
    "KeyboardInterrupt": "Ctrl-C raised again once a deferred interrupt may land",
    "SystemExit": "a command's exit status",
}
"""Built-in exceptions raised anywhere as the protocol they belong to, not as an error of the project."""

KEPT_RAISES = {
    # Caught where they are raised and turned into a QuartoError that names the file or the spec:
    ("_boolean", "ValueError"): "a spec option's parser: make_agent reports it as a SpecError",
    ("_search_root", "ValueError"): "a spec option's parser: make_agent reports it as a SpecError",
    ("_uct_playout", "ValueError"): "a spec option's parser: make_agent reports it as a SpecError",
    ("load_network", "ValueError"): "in the loader's try: a CheckpointError naming the checkpoint",
    ("network_from_description", "ValueError"): "read inside the loaders' try: a CheckpointError naming the file",
    ("with_weights", "ValueError"): "read inside the loaders' try: a CheckpointError naming the file",
    ("load_bytes", "ValueError"): "a resumed buffer, inside the resume's try: a CheckpointError naming the file",
    ("loaded", "ValueError"): "a resumed buffer, inside the resume's try: a CheckpointError naming the file",
    (
        "check_targets",
        "ValueError",
    ): "a resumed buffer's check, inside the resume's try: a CheckpointError naming the file",
    ("set_optimizer_state", "ValueError"): "in its own try: a CheckpointError naming the file",
    ("_npy_array", "ValueError"): "inside read_npz's try: a DatasetError naming the file",
    ("_played_game", "ValueError"): "a tournament's resume reports the record's line and what does not match",
    ("_check_replay", "ValueError"): "a tournament's resume reports the record's line and what does not match",
    ("_action_values", "ValueError"): "caught by _cached_values, which names the cache entry",
    ("_header_of", "ValueError"): "caught in its own try: the file has no header",
    ("_probe_record", "ValueError"): "caught in its own try: the command's one-line refusal",
    ("_publish", "OSError"): "a late write failure like any other: claim_output reports it as an OutputWriteError",
    # A lookup protocol: PositionValues.from_suite answers a position missing from the suite as a dict would.
    ("_not_in_suite", "KeyError"): "a mapping's miss, as a dict's (documented on PositionValues.from_suite)",
    # Bugs, not errors: no caller should catch them as a QuartoError.
    ("_score_at_least", "RuntimeError"): "a bug in the solver: an exact search stopped with no checkpoint",
    ("perfect_game", "AssertionError"): "a bug: the perfect opponent lost points",
    # Ray Tune's own channel: a trial's failure, which Tune records in the trial's error file.
    ("run_trial", "RuntimeError"): "a sweep trial that failed: Ray Tune records it, and the sweep reports the trial",
}
"""The bare built-in raises that stay, keyed by the function that raises them and the exception: each reason says
why it is not a ``QuartoError`` (the lead's note counts them)."""


# ---------------------------------------------------------------------------------------------------------
# The tree in the docstring
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Listed:
    """One class as the docstring draws it: its parent in the tree (``None`` for the root and the signals), the
    other bases in parentheses, and its home."""

    parent: str | None
    bases: tuple[str, ...]
    module: str


LINE = re.compile(
    r"^(?P<indent>[ │├└─]*)(?P<name>[A-Z]\w+)(?: \((?P<bases>[\w., ]+)\))?(?:\s+.*?)?(?:\[(?P<module>[\w.]+)\])?\s*$"
)


def listed_classes(doc: str) -> tuple[dict[str, Listed], dict[str, Listed]]:
    """The classes of the docstring's two drawings (the blocks after ``::``): the tree, each with its parent (the
    nearest line above drawn less deep), and the signals."""
    blocks = re.split(r"::\n\n", doc)[1:]
    assert len(blocks) == 2, "the docstring draws the tree, then the signals, each after '::'"
    drawings = []
    for block in blocks:
        lines = []
        for line in block.split("\n"):
            if not line.startswith("    "):
                break  # the drawing ends at the first line not indented
            text = line[4:]
            branch = text.lstrip(" │")
            if not text.strip() or (branch != text and not branch.startswith(("├", "└"))):
                continue  # a blank line, or a description's second line: bars and spaces, then text
            match = LINE.match(text)
            assert match, f"a line of the drawing that is no class: {line!r}"
            depth = len(match["indent"]) // 4
            lines.append((depth, match))
        drawings.append(lines)
    tree: dict[str, Listed] = {}
    parents: list[str] = []
    for depth, match in drawings[0]:
        del parents[depth:]
        parent = parents[-1] if parents else None
        bases = tuple(b.strip() for b in match["bases"].split(",")) if match["bases"] else ()
        tree[match["name"]] = Listed(parent, bases, match["module"] or ERRORS_MODULE)
        parents.append(match["name"])
    signals = {
        match["name"]: Listed(None, tuple(b.strip() for b in (match["bases"] or "").split(",")), match["module"] or "")
        for _, match in drawings[1]
    }
    return tree, signals


# ---------------------------------------------------------------------------------------------------------
# The classes in the source
# ---------------------------------------------------------------------------------------------------------
def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read_sources(root: Path = REPO) -> dict[str, str]:
    """The source of every module of the three packages, by module name."""
    return {
        module_name(path, root): path.read_text()
        for package in PACKAGES
        for path in sorted((root / package).rglob("*.py"))
    }


@functools.cache
def parsed(source: str) -> ast.Module:
    """The syntax tree of ``source``, parsed once for all the tests (the controls change one module of many)."""
    return ast.parse(source)


def defined_exceptions(sources: dict[str, str]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Every exception class the sources define: its name -> (its module, its bases as the docstring names them: a
    project class or a built-in by its name, another by its dotted name as imported, ``yaml.YAMLError``)."""
    imports: dict[str, dict[str, str]] = {}
    classes: dict[tuple[str, str], list[ast.expr]] = {}
    for module, source in sources.items():
        names: dict[str, str] = {}
        for node in ast.walk(parsed(source)):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.update({alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names})
            elif isinstance(node, ast.Import):
                names.update({alias.asname or alias.name: alias.name for alias in node.names})
            elif isinstance(node, ast.ClassDef):
                classes[module, node.name] = node.bases
        imports[module] = names

    def project_class(dotted: str, seen: int = 0) -> tuple[str, str] | None:
        """The (module, name) of the class a dotted name of the project means, through re-exports."""
        module, _, name = dotted.rpartition(".")
        if (module, name) in classes:
            return module, name
        if module in imports and name in imports[module] and seen < 10:
            return project_class(imports[module][name], seen + 1)
        return None

    def resolve(module: str, base: ast.expr) -> tuple[str, tuple[str, str] | None]:
        """A base as the docstring names it, and the project class it is (``None`` for any other)."""
        dotted = ast.unparse(base)
        head, _, rest = dotted.partition(".")
        if (module, dotted) in classes:
            return dotted, (module, dotted)
        if head in imports[module]:
            full = imports[module][head] + (f".{rest}" if rest else "")
            found = project_class(full)
            return (found[1], found) if found else (full, None)
        return dotted, None

    def is_exception(key: tuple[str, str], seen: frozenset[tuple[str, str]] = frozenset()) -> bool:
        for base in classes[key]:
            name, found = resolve(key[0], base)
            if found is not None and found not in seen and is_exception(found, seen | {key}):
                return True
            if found is None and (name in BUILT_IN_EXCEPTIONS or OUTSIDE_EXCEPTION.search(name)):
                return True
        return False

    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    for key in classes:
        if is_exception(key):
            module, name = key
            assert name not in found, f"two exception classes named {name}: in {found[name][0]} and {module}"
            found[name] = (module, tuple(resolve(module, base)[0] for base in classes[key]))
    return found


def contract_breaches(sources: dict[str, str], doc: str) -> list[str]:
    """What the sources define that the docstring does not say, and what it says that they do not define."""
    tree, signals = listed_classes(doc)
    defined = defined_exceptions(sources)
    wrong = []
    for name, (module, bases) in sorted(defined.items()):
        listed = tree.get(name) or signals.get(name)
        if listed is None:
            wrong.append(f"{name} ({module}) is not in {ERRORS_MODULE}'s tree: define it there, or list it")
            continue
        drawn = ((listed.parent,) if listed.parent else ()) + listed.bases
        if name == "QuartoError":
            drawn = ("Exception",)
        if bases != drawn:
            wrong.append(f"{name}'s bases are ({', '.join(bases)}) in {module}, ({', '.join(drawn)}) in the tree")
        if module != listed.module:
            wrong.append(f"{name} lives in {module}, the tree says {listed.module}")
        if name in signals and name not in SIGNALS:
            wrong.append(f"{name} is drawn as a signal, not a QuartoError: add it to SIGNALS with its reason")
    wrong.extend(f"{name} is in the tree but defined nowhere" for name in sorted({*tree, *signals} - set(defined)))
    return wrong


# ---------------------------------------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------------------------------------
def test_the_tree_lists_every_error_class_with_its_parents() -> None:
    breaches = contract_breaches(read_sources(), quarto_env.errors.__doc__ or "")
    assert not breaches, "the error contract is broken:\n" + "\n".join(breaches)


def test_every_error_but_the_signals_is_a_quarto_error() -> None:
    tree, signals = listed_classes(quarto_env.errors.__doc__ or "")
    assert set(signals) == SIGNALS
    root = next(name for name, listed in tree.items() if listed.parent is None)
    assert root == "QuartoError" and [name for name, listed in tree.items() if listed.parent is None] == [root]


def test_the_tree_matches_the_classes_as_python_sees_them() -> None:
    """The source reading checked against the classes themselves, for those of ``quarto_env.errors`` (cheap to
    import): each is a ``QuartoError``, with the tree's parent first and then the built-ins drawn beside it."""
    tree, _ = listed_classes(quarto_env.errors.__doc__ or "")
    here = {
        name: value
        for name, value in vars(quarto_env.errors).items()
        if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == ERRORS_MODULE
    }
    assert set(here) == {name for name, listed in tree.items() if listed.module == ERRORS_MODULE}
    for name, error in here.items():
        assert issubclass(error, QuartoError), name
        listed = tree[name]
        expected = ((listed.parent,) if listed.parent else ("Exception",)) + listed.bases
        assert tuple(base.__name__ for base in error.__bases__) == expected, name


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (("agents/match.py", "\n\nclass StrayError(ValueError):\n    pass\n"), "StrayError (agents.match) is not in"),
        (("experiments/arena/play.py", "\n\nclass Quit2(QuitGame):\n    pass\n"), "Quit2 (experiments.arena.play)"),
        (("agents/match.py", "\n\nclass BookError(Exception):\n    pass\n"), "two exception classes named BookError"),
    ],
    ids=["a new error elsewhere", "a subclass of a signal", "a class defined twice"],
)
def test_a_class_the_tree_does_not_list_is_found(change: tuple[str, str], words: str) -> None:
    """The controls: an error class added outside the tree is caught, however it inherits."""
    sources = read_sources()
    path, addition = change
    module = module_name(REPO / path, REPO)
    sources[module] += addition
    try:
        breaches = contract_breaches(sources, quarto_env.errors.__doc__ or "")
    except AssertionError as error:
        breaches = [str(error)]
    assert any(words in breach for breach in breaches), breaches


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("│   │   └── InUseError ", "│   ├── InUseError     ", "InUseError's bases are (OutputPathError)"),
        ("├── SamplingError (RuntimeError) ", "├── SamplingError (ValueError)   ", "SamplingError's bases"),
        ("        └── OutputWriteError   ", "        └── OutputWriteErr     ", "OutputWriteError (experiments.output)"),
        ("[experiments.arena.play]", "[experiments.arena.game]", "QuitGame lives in experiments.arena.play"),
    ],
    ids=["a parent changed", "a built-in changed", "a class left out", "a home changed"],
)
def test_a_tree_that_drifted_from_the_source_is_found(old: str, new: str, words: str) -> None:
    """The controls: the docstring edited alone -- a parent, a built-in base, a name, a home -- no longer matches."""
    doc = quarto_env.errors.__doc__ or ""
    assert old in doc
    breaches = contract_breaches(read_sources(), doc.replace(old, new))
    assert any(words in breach for breach in breaches), breaches


# ---------------------------------------------------------------------------------------------------------
# The raises
# ---------------------------------------------------------------------------------------------------------
def bare_raises(sources: dict[str, str]) -> list[tuple[str, int, str, str]]:
    """``(module, line, function, exception)`` of each ``raise`` of a built-in exception class in the sources
    (``raise ValueError(...)``, ``raise KeyError``; a re-raise of a caught error is not one)."""
    found = []
    for module, source in sources.items():
        tree = parsed(source)
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            nodes = list(ast.iter_child_nodes(function))
            while nodes:
                node = nodes.pop()
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                    continue  # its own raises are its own
                if isinstance(node, ast.Raise) and node.exc is not None:
                    raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                    if isinstance(raised, ast.Name) and raised.id in BUILT_IN_EXCEPTIONS:
                        found.append((module, node.lineno, function.name, raised.id))
                nodes.extend(ast.iter_child_nodes(node))
        for node in tree.body:  # at module level
            if isinstance(node, ast.Raise) and node.exc is not None:
                raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(raised, ast.Name) and raised.id in BUILT_IN_EXCEPTIONS:
                    found.append((module, node.lineno, "<module>", raised.id))
    return sorted(found)


def test_every_library_raise_is_a_quarto_error_or_says_why_not() -> None:
    unexplained = [
        f"{module}:{line} {function}() raises {error}"
        for module, line, function, error in bare_raises(read_sources())
        if error not in PROTOCOL_RAISES and (function, error) not in KEPT_RAISES
    ]
    assert not unexplained, (
        "raise a QuartoError subclass (quarto_env.errors; QuartoValueError is a ValueError too), or add the raise "
        "to KEPT_RAISES with why it stays:\n" + "\n".join(unexplained)
    )


def test_the_raise_scan_sees_a_bare_raise() -> None:
    """The control: a ``raise ValueError`` in a method, and one in a nested function, are found."""
    source = "class A:\n    def f(self):\n        def g():\n            raise ValueError('x')\n        raise KeyError\n"
    assert bare_raises({"m": source}) == [("m", 4, "g", "ValueError"), ("m", 5, "f", "KeyError")]
