"""Runnable experiments behind the ``quarto`` command: training, tournaments, solving, benchmarks.

Each module reads top to bottom and has a ``main(argv)``; nothing in ``quarto_env`` or ``agents`` imports
them.
"""
