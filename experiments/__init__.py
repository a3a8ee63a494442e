"""Runnable experiments behind the ``quarto`` command (:mod:`experiments.cli`, the one door): ``training/``,
``arena/`` and ``bench/``, over a few shared modules (command-line options, run folders). Nothing in
``quarto_env`` or ``agents`` imports them.
"""
