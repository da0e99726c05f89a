"""The mathematics of the paper: instances, normalisers, intervals and balls, the quantities with all their
backends, the hypotheses, statements and their registry, the expression parser and notation, input checks and
the memory budget.

Imports nothing from the wings above (``deciding``, ``io``, ``running``).
"""
