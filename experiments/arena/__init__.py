"""The arena: tournaments with ratings, grading against the exact solver, solving positions, playing and replaying
games, and the game-record format they share.
"""
