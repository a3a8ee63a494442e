"""The test suite. A regular package, not a namespace one: pgx 2.6 installs a top-level package named ``tests``
of its own, which would otherwise shadow this folder (``from tests.test_mcts import ...``)."""
