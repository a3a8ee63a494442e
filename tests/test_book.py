"""The opening book (agents/solver/book.py): its values and action values against the exact solver on small books, its
keys under the game's symmetries, the level enumeration against random play, and the file's refusals."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from agents.solver.book import (
    BookError,
    OpeningBook,
    board_key,
    book_levels,
    build_book,
    give_node,
    load_book,
    save_book,
)
from agents.solver.minimax import Solver
from quarto_env.core import NO_PIECE, STANDARD, State, Variant, from_board, legal_actions, step
from quarto_env.notation import parse_position
from quarto_env.symmetry import board_symmetries
from tests.test_alphazero import endgame

SQUARES = Variant.make(squares=True)


def mid_game_root(variant: Variant, seed: int, empty: int) -> State:
    """A give node with ``empty`` empty squares from a seeded game: the endgame position's first placement that
    does not end the game."""
    state = endgame(variant, seed, empty + 1)
    return next(s for a in legal_actions(variant, state) if not (s := step(variant, state, a)).over)


@pytest.fixture(scope="module")
def small_books() -> list[tuple[Variant, State, OpeningBook, Solver]]:
    books = []
    for variant, seed in ((STANDARD, 0), (STANDARD, 1), (SQUARES, 2)):
        solver = Solver(variant)
        root = mid_game_root(variant, seed, 8)
        books.append((variant, root, build_book(variant, 6, solver.value, root), solver))
    return books


def test_every_value_and_action_value_of_a_small_book_is_the_solvers(small_books) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    for variant, root, book, solver in small_books:
        for level in book_levels(variant, 6, root):
            nodes = list(level.values())
            for i in rng.choice(len(nodes), size=min(len(nodes), 12), replace=False):
                node = nodes[i]
                assert book.value(node) == solver.value(node)
                if node.num_empty > 6:  # its place nodes are covered too
                    assert book.action_values(node) == solver.solve(node, all_moves=True).action_values
                    placing = step(variant, node, int(rng.choice(list(book.action_values(node)))))
                    assert book.knows(placing)
                    assert book.action_values(placing) == solver.solve(placing, all_moves=True).action_values
                    assert book.value(placing) == solver.value(placing)


def test_a_board_and_its_symmetric_images_share_one_key() -> None:
    rng = np.random.default_rng(3)
    for variant in (STANDARD, SQUARES):
        images = board_symmetries(variant.groups)
        assert len(images) == (8 if variant.squares else 32)
        for seed in range(5):
            state = mid_game_root(variant, seed, int(rng.integers(6, 13)))
            key = board_key(state.lanes, state.occupied, variant)
            for image in images:
                moved = [NO_PIECE] * 16
                for square, piece in enumerate(state.board):
                    moved[image[square]] = piece
                flipped = [p if p == NO_PIECE else p ^ 0b0101 for p in moved]  # complement two attributes
                for board in (moved, flipped):
                    other = from_board(board)
                    assert board_key(other.lanes, other.occupied, variant) == key


def test_the_levels_hold_every_board_of_random_games() -> None:
    levels = book_levels(STANDARD, 12)
    assert [len(level) for level in levels] == [1, 2, 40, 454, 10_346]  # the counts the module docstring gives
    keys = [set(level) for level in levels]
    rng = np.random.default_rng(1)
    for _ in range(200):
        state = State()
        while state.num_empty >= 12 and not state.over:
            if not state.placing:
                assert board_key(state.lanes, state.occupied, STANDARD) in keys[16 - state.num_empty]
            state = step(STANDARD, state, int(rng.choice(legal_actions(STANDARD, state))))


def test_a_book_round_trips_and_refuses_a_damaged_or_foreign_file(small_books, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    variant, _, book, _ = small_books[0]
    path = tmp_path / "book.npz"
    save_book(path, book, {"built_by": "a test"})
    loaded = load_book(path, variant)
    assert loaded.values == book.values and loaded.min_empty == book.min_empty
    with pytest.raises(BookError, match="for the rules"):
        load_book(path, SQUARES)
    with pytest.raises(BookError, match="no opening book at"):
        load_book(tmp_path / "missing.npz", variant)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(BookError, match="damaged or not a book"):
        load_book(tmp_path / "junk.npz", variant)
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    tampered = dict(arrays, value=-arrays["value"] + (arrays["value"] == 0))  # every value changed
    np.savez(tmp_path / "tampered.npz", **tampered)
    with pytest.raises(BookError, match="does not match its checksum"):
        load_book(tmp_path / "tampered.npz", variant)
    header = json.loads(bytes(arrays["header"]).decode())
    outdated = dict(arrays, header=np.frombuffer(json.dumps({**header, "format": 0}).encode(), np.uint8))
    np.savez(tmp_path / "outdated.npz", **outdated)
    with pytest.raises(BookError, match="rebuild it"):
        load_book(tmp_path / "outdated.npz", variant)


def test_the_book_refuses_what_it_does_not_cover() -> None:
    with pytest.raises(ValueError, match="without declaration"):
        book_levels(Variant.make(declaration=True), 12)
    with pytest.raises(ValueError, match="give node"):
        book_levels(STANDARD, 12, step(STANDARD, State(), 0))
    with pytest.raises(ValueError, match="min_empty must be 1 to the root's 16"):
        book_levels(STANDARD, 17)
    book = OpeningBook(STANDARD, 12, {})
    assert not book.knows(give_node(0, 0b1111_1111)) and book.knows(give_node(0, 0b1111))
    assert not book.covers(give_node(0, 0b1111)) and book.covers(State())
    with pytest.raises(BookError, match="no entry"):
        book.value(State())


def test_a_solver_with_a_book_answers_covered_positions_without_search(small_books) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(5)
    searched_past = 0
    for variant, root, book, solver in small_books:
        booked = Solver(variant, book=book)
        node = root
        while book.covers(node):
            answer, exact = booked.solve(node, all_moves=True), solver.solve(node, all_moves=True)
            assert (answer.value, answer.best_actions, answer.action_values) == (
                exact.value,
                exact.best_actions,
                exact.action_values,
            )
            assert answer.nodes == 0
            value, action = booked.random_best_action(node, rng)
            assert value == exact.value and action in (exact.best_actions or [])
            node = step(variant, node, action)
        assert booked.nodes == 0  # every answer came from the book
        if not node.over:  # past the book: the search
            assert booked.solve(node).value == solver.solve(node).value and booked.nodes > 0
            searched_past += 1
    assert searched_past


# ---------------------------------------------------------------------------------------------------------
# quarto book
# ---------------------------------------------------------------------------------------------------------
ROOT = "40f.7....9d..3.b -"


def quarto_book(*argv: str) -> int:
    from experiments.arena import book as command

    return command.main(list(argv))


def test_quarto_book_builds_the_book_build_book_builds(tmp_path: Path) -> None:
    out = tmp_path / "book.npz"
    assert quarto_book("--root", ROOT, "--min-empty", "6", "--out", str(out)) == 0
    built = load_book(out, STANDARD)
    root = parse_position(ROOT)
    assert built.values == build_book(STANDARD, 6, Solver(STANDARD).value, root).values
    assert built.root == root and not (tmp_path / "book.npz.partial.npz").exists()


def test_quarto_book_resumes_from_its_partial_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out, partial = tmp_path / "book.npz", tmp_path / "book.npz.partial.npz"
    root = parse_position(ROOT)
    bottom = book_levels(STANDARD, 6, root)[-1]
    solver = Solver(STANDARD)
    planted = {key: solver.value(node) for key, node in list(bottom.items())[: len(bottom) // 2]}
    first = next(iter(planted))
    planted[first] = 1 if planted[first] != 1 else -1  # a value only the partial file holds
    save_book(partial, OpeningBook(STANDARD, 6, planted, root), {"partial": True})
    assert quarto_book("--root", ROOT, "--min-empty", "6", "--out", str(out)) == 0
    assert "resuming" in capsys.readouterr().err
    built = load_book(out, STANDARD)
    assert built.values[first] == planted[first] and set(bottom) <= set(built.values)
    assert not partial.exists()


def test_quarto_book_refuses_a_partial_file_of_another_build(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out, partial = tmp_path / "book.npz", tmp_path / "book.npz.partial.npz"
    save_book(partial, OpeningBook(STANDARD, 7, {}, parse_position(ROOT)), {"partial": True})
    assert quarto_book("--root", ROOT, "--min-empty", "6", "--out", str(out)) == 2
    assert "goes down to 7 empty squares, not 6" in capsys.readouterr().err
    save_book(partial, OpeningBook(STANDARD, 6, {}), {"partial": True})  # from the empty board
    assert quarto_book("--root", ROOT, "--min-empty", "6", "--out", str(out)) == 2
    assert "another root" in capsys.readouterr().err
    with pytest.raises(BookError, match="the unfinished build of a book"):
        load_book(partial, STANDARD)
    assert not out.exists()


def test_the_shipped_book_is_refused_with_a_warning_when_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agents.solver.book as book_module

    monkeypatch.setattr(book_module, "BOOK_FOLDER", tmp_path)
    book_module.shipped_book.cache_clear()
    try:
        assert book_module.shipped_book(STANDARD) is None  # none shipped here
        book_module.default_book_path(STANDARD).write_bytes(b"damaged")
        book_module.shipped_book.cache_clear()
        with pytest.warns(UserWarning, match="damaged or not a book.*searches without it"):
            assert book_module.shipped_book(STANDARD) is None
        save_book(book_module.default_book_path(STANDARD), OpeningBook(STANDARD, 6, {}, parse_position(ROOT)))
        book_module.shipped_book.cache_clear()
        with pytest.warns(UserWarning, match="not the empty board"):
            assert book_module.shipped_book(STANDARD) is None
    finally:
        book_module.shipped_book.cache_clear()
    assert book_module.default_book_path(Variant.make(squares=True)).name == "book-squares.npz"
    assert book_module.default_book_path(Variant.make(attributes=2)).name.startswith("book-")


TRUNCATIONS: dict[str, Callable[[int], int]] = {
    "empty": lambda size: 0,
    "its first bytes": lambda size: 10,
    "half of it": lambda size: size // 2,
    "all but its last byte": lambda size: size - 1,
}
"""How many of a book file's ``size`` bytes a damaged copy keeps."""


def truncated_copy(source: Path, path: Path, keep: Callable[[int], int]) -> Path:
    """``path``, written with the first ``keep(size)`` of ``source``'s bytes."""
    data = source.read_bytes()
    path.write_bytes(data[: keep(len(data))])
    return path


@pytest.mark.parametrize("keep", TRUNCATIONS.values(), ids=TRUNCATIONS)
def test_a_truncated_or_empty_book_is_a_book_error(small_books, tmp_path: Path, keep: Callable[[int], int]) -> None:  # type: ignore[no-untyped-def]
    variant, _, book, _ = small_books[0]
    save_book(tmp_path / "book.npz", book)
    damaged = truncated_copy(tmp_path / "book.npz", tmp_path / "damaged.npz", keep)
    with pytest.raises(BookError, match=r"^opening book '.*damaged.npz' is damaged or not a book \(.+\)$"):
        load_book(damaged, variant)


@pytest.mark.parametrize("keep", TRUNCATIONS.values(), ids=TRUNCATIONS)
def test_a_truncated_shipped_book_gives_one_warning_and_no_book(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep: Callable[[int], int]
) -> None:
    """A damaged copy of the shipped book, put where ``shipped_book`` looks (agents/data is left as it is)."""
    import agents.solver.book as book_module

    truncated_copy(book_module.default_book_path(STANDARD), tmp_path / "book-standard.npz", keep)
    monkeypatch.setattr(book_module, "BOOK_FOLDER", tmp_path)
    book_module.shipped_book.cache_clear()
    try:
        with pytest.warns(UserWarning, match="is damaged or not a book .*; the solver searches without it") as caught:
            assert book_module.shipped_book(STANDARD) is None
        assert len(caught) == 1 and "\n" not in str(caught[0].message)
    finally:
        book_module.shipped_book.cache_clear()


def test_quarto_book_refuses_a_truncated_partial_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out, partial = tmp_path / "b.npz", tmp_path / "b.npz.partial.npz"
    save_book(partial, OpeningBook(STANDARD, 6, {}, parse_position(ROOT)), {"partial": True})
    truncated_copy(partial, partial, TRUNCATIONS["half of it"])
    assert quarto_book("--root", ROOT, "--min-empty", "6", "--out", str(out)) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"quarto book: opening book {str(partial)!r} is damaged or not a book (")
    assert error.endswith("); remove it to start again\n") and error.count("\n") == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["b.npz.partial.npz"]


def test_quarto_book_refuses_a_folder_where_its_partial_file_goes_before_solving(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, partial = tmp_path / "b.npz", tmp_path / "b.npz.partial.npz"
    partial.mkdir()

    def no_solving(*args: object) -> int:
        raise AssertionError("solved a board before refusing the command")

    monkeypatch.setattr(Solver, "value", no_solving)
    with pytest.raises(SystemExit) as exit_info:
        quarto_book("--root", ROOT, "--min-empty", "6", "--out", str(out))
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        f"quarto book: {str(partial)!r}, where --out {str(out)!r} keeps an unfinished build, is not a file (a folder, "
        "a device or a broken link): remove it, or name another --out\n"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["b.npz.partial.npz"]
    assert list(partial.iterdir()) == []


def test_the_solver_agent_plays_from_the_book_where_it_covers(small_books, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import agents.solver.minimax as minimax

    variant, root, book, solver = small_books[0]
    monkeypatch.setattr(minimax, "shipped_book", lambda _: book)
    agent = minimax.SolverAgent(variant, seed=0, empties=2)  # without the book: minimax down to 2 empty
    assert agent.empties == book.min_empty == 6  # exact from the book's bottom on
    state = root
    while book.covers(state):
        action = agent.act(state)
        assert agent.last_value == solver.value(state) and agent.last_nodes == 0
        assert action in (solver.solve(state).best_actions or [])
        state = step(variant, state, action)
    assert not state.over and state.num_empty == 6
    agent.act(state)  # past the book, at its bottom: solved live
    assert agent.last_value == solver.value(state) and agent.last_nodes > 0
    monkeypatch.setattr(minimax, "shipped_book", lambda _: None)
    assert minimax.SolverAgent(variant, seed=0, empties=2).act(state) is not None
    bookless = minimax.SolverAgent(variant, seed=0, empties=2)
    bookless.act(state)
    assert bookless.last_value is None  # no book, above empties: the fallback minimax


def test_a_positions_key_is_shared_by_its_images_and_by_nothing_else() -> None:
    from quarto_env.core import position_array
    from quarto_env.symmetry import Symmetries

    rng = np.random.default_rng(7)
    for variant in (STANDARD, SQUARES):
        symmetries = Symmetries(variant)
        rows = position_array([endgame(variant, seed, int(rng.integers(4, 14))) for seed in range(6)])  # in hand
        keys = [symmetries.position_key(row) for row in rows]
        assert len(set(keys)) == len(keys)  # six seeded games: no two alike
        for row, key in zip(rows, keys, strict=True):
            chosen = rng.integers(len(symmetries.images), size=4), rng.integers(len(symmetries.sources), size=4)
            images, _ = symmetries.apply_chosen(np.repeat(row[None], 4, 0), np.zeros((4, 16), np.float32), *chosen)
            assert all(symmetries.position_key(image) == key for image in images)
    # give nodes: the same classes as the book's board keys
    symmetries = Symmetries(STANDARD)
    nodes = list(book_levels(STANDARD, 13)[3].values())
    assert len({symmetries.position_key(row) for row in position_array(nodes)}) == len(nodes) == 454


@pytest.mark.parametrize("variant", [STANDARD, SQUARES], ids=["standard", "squares"])
def test_a_shipped_book_holds_every_early_board_and_a_sample_agrees_with_live_solves(variant: Variant) -> None:
    """The shipped book checks out (its header and hash: :func:`agents.solver.book.shipped_book`), starts from the empty
    board, holds exactly the canonical boards that :func:`book_levels` lists down to its bottom, and a seeded
    sample of its bottom entries, solved live by a solver without it, has the book's values."""
    from agents.solver.book import shipped_book

    book = shipped_book(variant)
    assert book is not None, "the standard and squares books ship with the package"
    assert book.root == State()
    levels = book_levels(variant, book.min_empty)
    assert set(book.values) == {key for level in levels for key in level}
    solver = Solver(variant, table_bits=20)
    rng = np.random.default_rng(24)
    bottom = levels[-1]
    for key in rng.choice(sorted(bottom), size=3, replace=False):
        state = bottom[tuple(int(k) for k in key)]
        assert solver.value(state) == book.values[board_key(state.lanes, state.occupied, variant)]
    assert book.value(State()) == 0  # the game is a draw (Goossens 1998; the project's own proof, docs/solver.md)
