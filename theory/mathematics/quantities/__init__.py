"""The paper's named quantities, each with one specification and its float, ball and torch forms.

A statement is a sympy relation over these names (plus the instance's parameters). One module per
section of the paper holds the specifications with their implementations side by side
(:mod:`.weights`, :mod:`.lemma1`, :mod:`.theorem1`, :mod:`.theorem2`, :mod:`.jacobian`,
:mod:`.multihead`); :mod:`.spec` defines the specification and the registry. ``compute(name, inst)``
gives the float value on a batch (dense or token classes), ``interval(name, inst)`` the
Monte Carlo interval of an expectation, ``magnitude(name, inst)`` the size of the numbers it is
computed from.
"""

from attnbounds.theory.mathematics.quantities.spec import (BACKENDS, COSTS, QUANTITIES, Cost, MonteCarlo, Quantity, ball_value, compute,
                                               define, interval, magnitude, register, spec)
from attnbounds.theory.mathematics.quantities import weights, lemma1, theorem1, theorem2, jacobian, multihead  # noqa: E402,F401
from attnbounds.theory.mathematics.quantities.theorem2 import sphere_embeddings  # noqa: E402

__all__ = ["BACKENDS", "COSTS", "QUANTITIES", "Cost", "MonteCarlo", "Quantity", "compute", "define", "interval",
           "magnitude", "register", "spec", "sphere_embeddings"]
