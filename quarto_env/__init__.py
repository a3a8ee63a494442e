"""Quarto for reinforcement learning: a fast rules core and the PettingZoo AEC environment ``quarto_v0``."""
