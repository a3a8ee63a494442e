"""``quarto bench WHAT``: the speed benchmarks. Each prints its figures, as ratios to a reference measured in the
same run where one exists.
"""
