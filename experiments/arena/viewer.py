"""``quarto replay RECORD --html OUT``: one self-contained HTML page of every game of a ``games.jsonl`` file.

The page needs no network: its boards are the SVG pictures of :func:`quarto_env.render.svg_board`, its style and
its script are inline. It holds a list of the games (players and result), the board of the chosen position with
buttons and the arrow keys to step through the game, and the move list: each move in words with the position it
leads to in the project's notation (:mod:`quarto_env.notation`). With grading (:func:`graded_verdicts`), each of
the agents' moves carries the exact solver's verdict: ``kept`` (the move keeps the position's value under perfect
play) or the value it threw away, ``won->drawn``, ``won->lost`` or ``drawn->lost``.

Kept small: a board's SVG is stored as a list of numbers, each naming one line of SVG in a table of the distinct
lines of all the pictures (a piece on a square is the same line in every position that has it), and the
script joins the lines back into the SVG when the position is shown. A 400-game tournament is about 5 MB.

The page reads ``#game=G&move=M`` from its address on load (and whenever it changes) and keeps it up to date, so
that a position can be linked to.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass

from experiments.evaluation.moves import KEPT, graded_games
from quarto_env.core import NUM_SQUARES, State, Variant
from quarto_env.notation import format_position
from quarto_env.render import svg_board

__all__ = ["ViewedGame", "graded_verdicts", "viewer_page"]


@dataclass(frozen=True)
class ViewedGame:
    """One game of the page: its title, result, the players' names, the positions and the moves between them."""

    title: str
    result: str
    names: tuple[str, str]
    variant: Variant
    states: list[State]
    """Every position from the empty board: ``len(actions) + 1`` of them."""
    actions: list[int]
    captions: list[str]
    """The words for each move (the last one says how the game ended)."""
    first_agent_move: int
    """The index of the agents' first move: the ones before are the record's random opening, never graded."""


def graded_verdicts(games: Sequence[ViewedGame], jobs: int = 1, progress: bool = False) -> list[list[str | None]]:
    """The exact solver's verdict on each move of ``games`` (``None`` for the random opening's moves), the
    positions valued in batches in ``jobs`` worker processes (:func:`experiments.evaluation.moves.graded_games`;
    ``progress``: a bar on stderr)."""
    return graded_games([(game.variant, game.states, game.first_agent_move) for game in games], jobs, progress)


class _LineTable:
    """The distinct lines of many SVG pictures, each numbered once; a picture is the list of its lines' numbers."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}

    def picture(self, svg: str) -> list[int]:
        return [self.numbers.setdefault(line, len(self.numbers)) for line in svg.split("\n")]

    def lines(self) -> list[str]:
        return list(self.numbers)


def _last_square(before: State, action: int) -> int | None:
    """The square that ``action`` fills, if it is a placement."""
    return action if before.placing and 0 <= action < NUM_SQUARES else None


def _game_data(game: ViewedGame, verdicts: Sequence[str | None] | None, table: _LineTable) -> dict:
    boards = [table.picture(svg_board(game.variant, game.states[0], game.names))]
    moves = []
    for ply, (before, action, after, caption) in enumerate(
        zip(game.states[:-1], game.actions, game.states[1:], game.captions, strict=True)
    ):
        svg = svg_board(game.variant, after, game.names, caption, _last_square(before, action))
        boards.append(table.picture(svg))
        moves.append(
            {"text": caption, "position": format_position(after), "verdict": verdicts[ply] if verdicts else None}
        )
    return {"title": game.title, "result": game.result, "moves": moves, "boards": boards}


def viewer_page(
    games: Sequence[ViewedGame],
    title: str,
    verdicts: Sequence[Sequence[str | None]] | None = None,
    start_game: int = 0,
) -> str:
    """The HTML page of ``games``, titled ``title``, opening at game ``start_game``; with ``verdicts`` (one per
    move of each game, ``None`` for the random opening's: :func:`graded_verdicts`) each agent's move carries the
    solver's verdict."""
    table = _LineTable()
    data = [
        _game_data(game, verdicts[number] if verdicts is not None else None, table) for number, game in enumerate(games)
    ]
    payload = {"lines": table.lines(), "games": data, "start": start_game, "graded": verdicts is not None}
    script_data = json.dumps(payload, separators=(",", ":")).replace("</", "<\\/")
    entries = "\n".join(
        _game_entry(number, game, entry) for number, (game, entry) in enumerate(zip(games, data, strict=True))
    )
    return _PAGE.format(
        title=html.escape(title),
        games=len(games),
        entries=entries,
        data=script_data,
        style=_STYLE,
        script=_SCRIPT,
    )


def _game_entry(number: int, game: ViewedGame, data: dict) -> str:
    lost = sum(1 for move in data["moves"] if move["verdict"] not in (None, KEPT))
    graded = any(move["verdict"] for move in data["moves"])
    badge = f' <span class="lost-count">{lost} value-losing move(s)</span>' if graded else ""
    text = html.escape(f"{game.title}: {game.result} ({len(game.actions)} moves)")
    return f'<li data-game="{number}"><a href="#game={number}&amp;move=0">{text}</a>{badge}</li>'


_STYLE = """
body { font-family: DejaVu Sans, Verdana, Arial, sans-serif; margin: 0; display: flex; height: 100vh; }
nav { width: 22em; overflow-y: auto; border-right: 1px solid #ccc; padding: 0.5em; font-size: 0.85em; }
nav li.current { background: #f0e0c0; }
main { flex: 1; display: flex; gap: 1em; padding: 0.5em; overflow: hidden; }
#view { display: flex; flex-direction: column; gap: 0.4em; }
#board svg { max-width: 100%; height: auto; }
#moves { overflow-y: auto; font-size: 0.85em; min-width: 22em; }
#moves li { cursor: pointer; padding: 1px 3px; }
#moves li.current { background: #f0e0c0; }
#moves code { color: #555; }
.verdict { font-weight: bold; margin-left: 0.4em; }
.verdict.kept { color: #2a7a2a; font-weight: normal; }
.verdict.lost { color: #b02020; }
.lost-count { color: #b02020; }
"""

_SCRIPT = r"""
const data = JSON.parse(document.getElementById("viewer-data").textContent);
let game = -1, move = 0;
const $ = (id) => document.getElementById(id);
function boardSvg(g, m) { return data.games[g].boards[m].map((i) => data.lines[i]).join("\n"); }
function verdictClass(v) { return v === "kept" ? "kept" : "lost"; }
function buildMoves(g) {
  const list = $("moves");
  list.innerHTML = "";
  data.games[g].moves.forEach((mv, i) => {
    const li = document.createElement("li");
    li.dataset.move = i + 1;
    li.textContent = mv.text + " ";
    const code = document.createElement("code");
    code.textContent = mv.position;
    li.appendChild(code);
    if (mv.verdict) {
      li.dataset.verdict = mv.verdict;
      const span = document.createElement("span");
      span.className = "verdict " + verdictClass(mv.verdict);
      span.textContent = mv.verdict;
      li.appendChild(span);
    }
    li.onclick = () => show(g, i + 1);
    list.appendChild(li);
  });
}
function show(g, m) {
  g = Math.max(0, Math.min(data.games.length - 1, g | 0));
  const last = data.games[g].boards.length - 1;
  m = Math.max(0, Math.min(last, m | 0));
  if (g !== game) {
    buildMoves(g);
    document.querySelectorAll("nav li").forEach((li) => li.classList.toggle("current", +li.dataset.game === g));
    $("title").textContent = data.games[g].title + ": " + data.games[g].result;
  }
  game = g; move = m;
  const board = $("board");
  board.innerHTML = boardSvg(g, m);
  board.dataset.game = g; board.dataset.move = m;
  $("counter").textContent = "move " + m + " of " + last;
  document.querySelectorAll("#moves li").forEach((li) => li.classList.toggle("current", +li.dataset.move === m));
  const current = document.querySelector("#moves li.current");
  if (current) current.scrollIntoView({block: "nearest"});
  const hash = "#game=" + g + "&move=" + m;
  if (location.hash !== hash) history.replaceState(null, "", hash);
}
function fromHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  const g = params.has("game") ? parseInt(params.get("game"), 10) : data.start;
  const m = params.has("move") ? parseInt(params.get("move"), 10) : 0;
  show(isNaN(g) ? data.start : g, isNaN(m) ? 0 : m);
}
$("first").onclick = () => show(game, 0);
$("prev").onclick = () => show(game, move - 1);
$("next").onclick = () => show(game, move + 1);
$("last").onclick = () => show(game, data.games[game].boards.length - 1);
document.addEventListener("keydown", (e) => {
  const keys = {ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0]};
  if (e.key === "Home") show(game, 0);
  else if (e.key === "End") show(game, data.games[game].boards.length - 1);
  else if (keys[e.key]) {
    const [dg, dm] = keys[e.key];
    show(game + dg, dg ? 0 : move + dm);
  } else return;
  e.preventDefault();
});
window.addEventListener("hashchange", fromHash);
fromHash();
"""

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<nav>
<h2>{games} game(s)</h2>
<ol id="games" start="0">
{entries}
</ol>
</nav>
<main>
<div id="view">
<div id="title"></div>
<div id="board"></div>
<div id="controls">
<button id="first" title="first position (Home)">&#x25C0;&#x25C0;</button>
<button id="prev" title="previous move (left arrow)">&#x25C0;</button>
<button id="next" title="next move (right arrow)">&#x25B6;</button>
<button id="last" title="last position (End)">&#x25B6;&#x25B6;</button>
<span id="counter"></span> <small>up/down arrows: other game</small>
</div>
</div>
<ol id="moves"></ol>
</main>
<script id="viewer-data" type="application/json">{data}</script>
<script>{script}</script>
</body>
</html>
"""
