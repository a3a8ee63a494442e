"""Evaluation, the floor that training and the arena share: the games of an evaluation (:mod:`.games`), grading
against the exact solver (:mod:`.grading`), play against perfect play (:mod:`.perfect`), ratings and intervals
(:mod:`.ratings`), a move in words and its verdict (:mod:`.moves`), and a training run's sample games
(:mod:`.sample_games`). It imports neither training nor the arena; both import it.

Only :mod:`.games` and :mod:`.sample_games` need torch (the ``train`` extra); the rest serves the arena without it.
"""
