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

#: quantities whose ball form gives a closed form along growing token classes (see Quantity.closed_form);
#: the others decide branches on count-dependent values (N_s), enumerate count vectors (E_dtilde), sample
#: (E_Ns) or bound eigenvalues from float eigenvectors (J_spectral)
for _name in ("alpha_i", "alpha_min", "alpha_max", "abar_N", "logit_absmax", "C_1", "C_2", "Delta_own", "Delta_max",
              "max_norm", "d_1", "context_distance", "dtilde_R1", "dtilde_R2", "A_norm", "m_norm", "J_scaled_weighted",
              "J_scaled_mean", "J_printed_weighted", "J_printed_mean", "jensen_gap_bound", "xi", "C_other", "r_paper",
              "J_frobenius", "J_row", "J_entry", "dF_max", "F_l2", "dF_l2", "g_absmax", "g_fd", "coverage_enum"):
    QUANTITIES[_name].closed_form = True

__all__ = ["BACKENDS", "COSTS", "QUANTITIES", "Cost", "MonteCarlo", "Quantity", "compute", "define", "interval",
           "magnitude", "register", "spec", "sphere_embeddings"]
