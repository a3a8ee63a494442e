"""The example notebook (docs/examples/quarto_in_a_notebook.ipynb) runs from top to bottom in a real kernel
(nbclient), shows the env as an SVG board before and after the game, and plays a whole game."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from quarto_env.core import Variant
from quarto_env.notation import parse_position

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "docs" / "examples" / "quarto_in_a_notebook.ipynb"


@pytest.mark.slow
def test_the_example_notebook_runs_and_draws_the_board() -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": ROOT}}
    ).execute()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    shown = [output for cell in code for output in cell.outputs if output.output_type == "execute_result"]
    assert len(shown) == 2 and all(output.data["image/svg+xml"].startswith("<svg") for output in shown)
    printed = "".join(output.text for cell in code for output in cell.outputs if output.output_type == "stream")
    rewards_line, position_line = (line for line in printed.splitlines() if line.startswith(("final", "position")))
    rewards = ast.literal_eval(rewards_line.removeprefix("final rewards: "))
    assert set(rewards) == {"player_0", "player_1"} and sum(rewards.values()) == 0
    assert parse_position(position_line.removeprefix("position: "), Variant.make(squares=True)).over
