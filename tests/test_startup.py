"""Start-up: what a new process pays to import quarto_env and take its first env step (``quarto bench startup``)."""

from __future__ import annotations

import re

import pytest


def test_quarto_bench_startup_prints_a_warm_and_a_cold_row(capsys: pytest.CaptureFixture[str]) -> None:
    from experiments.bench.startup import main

    assert main(["--runs", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[2:]] == ["warm", "cold"]
    for line in lines[2:]:  # wall and CPU seconds: a median, then the fastest and the slowest run, each
        seconds = [float(number) for number in re.findall(r"\d+\.\d+", line)]
        assert len(seconds) == 6 and all(value > 0 for value in seconds)
