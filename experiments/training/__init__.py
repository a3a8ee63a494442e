"""``quarto train`` and what serves it: the config, the backends (MaskablePPO, AlphaZero, RLlib's PPO), self-play
opponents, sweeps on Ray Tune, evaluation of checkpoints and curves of runs.
"""
