"""The supervised probe, ``quarto bench network``: how much of perfect play a network design can learn, trained
on the exact solver's values (:mod:`.network`: the command and its report; :mod:`.positions`: the labelled
positions; :mod:`.fit`: the supervised training). It is an experiment, not a speed benchmark, so it lives beside
training and the arena, importing neither; its command keeps its name under ``quarto bench``, as
docs/learnability.md's measurements cite it.
"""
