"""Environments against an agent: the entry points of ``quarto_env/QuartoVsAgent-v1`` (one env and a vector of
them), which build the opponent from an agent spec, and the adapter that hands the vector to Stable-Baselines3."""
