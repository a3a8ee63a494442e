"""The exact solver: the compiled negamax alpha-beta search (:mod:`agents.solver.kernels`, run from Python by
:class:`agents.solver.alphabeta.AlphaBetaSearch`), its move ordering and transposition table, the minimax and
solver agents, the opening book, the value cache across runs, exact labels and the suites of solved positions."""
