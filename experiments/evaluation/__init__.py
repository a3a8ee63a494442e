"""Evaluation, the floor that training and the arena share: the games of an evaluation (:mod:`.games`), grading
against the exact solver (:mod:`.grading`), play against perfect play (:mod:`.perfect`), ratings and intervals
(:mod:`.ratings`), a move in words and its verdict (:mod:`.moves`), a training run's sample games
(:mod:`.sample_games`) and its evaluation log and final table (:mod:`.log`), the Markdown tables of every report
(:mod:`.tables`); and, apart from that library, the options of the commands that grade (:mod:`.arguments`). It
imports neither training nor the arena; both import it.

Only :mod:`.games`, :mod:`.sample_games` and :mod:`.log` need torch (the ``train`` extra); the rest serves the arena
without it.
"""
