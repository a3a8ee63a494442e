"""Shared test setup."""

import os

# The "human" render mode opens a window when matplotlib has an interactive backend: never in the tests.
os.environ.setdefault("MPLBACKEND", "Agg")
