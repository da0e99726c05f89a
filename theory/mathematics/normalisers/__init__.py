"""The normalisers ``F`` of paper eq. (3): ``alpha_i = F(l_i, theta) / sum_j F(l_j, theta)``, and the maps beyond it.

One module per normaliser holds its specification with its forms side by side (:mod:`.spec` says what a
specification carries: forms, capabilities, parameters): the ratio normalisers, each generated from one ``log F``
(:mod:`.ratio`), and the maps that are not of the form F / sum F with F > 0, each a class with its own closed forms
(:mod:`.relu`, :mod:`.sparsemax`, :mod:`.entmax`, :mod:`.sigmoid_attention`, :mod:`.softpick`, :mod:`.sa_softmax`);
they satisfy neither of Lemma 1's hypotheses. A new map is one module (its class and :func:`map_spec`) and its entry
in :data:`BUILTIN` below: strategies, families, certification and the cross-check of forms
(``tests/rigor/test_normaliser_forms.py``) read its specification, no list of names.

Every kernel works on a batch ``logits`` of shape ``(B, L)`` and is stable for
``T`` in ``[1e-4, 1e3]`` and ``|l| <= 1e3`` (log-sum-exp, no overflow).
"""

from attnbounds.theory.mathematics.normalisers.spec import (CONSTRUCTORS, FORMS, TEMPERATURE, BallContext, MapSpec,
                                                            Normaliser, NormaliserSpec, Param, SimplexMap, check_logits,
                                                            constructor_parameters, constructors_added, make, map_spec,
                                                            own_parameters, prototype, register)
from attnbounds.theory.mathematics.normalisers.symbolic import (L_sym, complement_sigmoid, derivative, l_sym, sigmoid,
                                                                softplus, stable_log)
from attnbounds.theory.mathematics.normalisers.ratio import (RatioNormaliser, RatioSpec, exp_poly, scalable_softmax,
                                                             shifted_sigmoid, softmax, softplus_shift)
from attnbounds.theory.mathematics.normalisers import (entmax, ratio, relu, sa_softmax, sigmoid_attention, softpick,
                                                       sparsemax)
from attnbounds.theory.mathematics.normalisers.entmax import Entmax15
from attnbounds.theory.mathematics.normalisers.relu import ReluNormalised
from attnbounds.theory.mathematics.normalisers.sa_softmax import SelfAdjustingSoftmax
from attnbounds.theory.mathematics.normalisers.sigmoid_attention import SigmoidAttention
from attnbounds.theory.mathematics.normalisers.softpick import Softpick
from attnbounds.theory.mathematics.normalisers.sparsemax import Sparsemax

#: the built-in normalisers, in the order the search and the strategies draw them
BUILTIN: tuple[NormaliserSpec, ...] = (
    ratio.SOFTMAX, ratio.SOFTPLUS, ratio.EXP_POLY, ratio.SHIFTED_SIGMOID, ratio.SSMAX,
    relu.SPEC, sparsemax.SPEC, entmax.SPEC, sigmoid_attention.SPEC, softpick.SPEC, sa_softmax.SPEC,
)
for _spec in BUILTIN:
    register(_spec)
#: the names above: a statements file or a Python callable registers more in CONSTRUCTORS for its process
BUILTIN_NAMES: frozenset[str] = frozenset(CONSTRUCTORS)

__all__ = ["BUILTIN", "BUILTIN_NAMES", "CONSTRUCTORS", "FORMS", "TEMPERATURE", "BallContext", "Entmax15", "L_sym",
           "MapSpec", "Normaliser", "NormaliserSpec", "Param", "RatioNormaliser", "RatioSpec", "ReluNormalised",
           "SelfAdjustingSoftmax", "SigmoidAttention", "SimplexMap", "Softpick", "Sparsemax", "check_logits",
           "complement_sigmoid", "constructor_parameters", "constructors_added", "derivative", "exp_poly", "l_sym",
           "make", "map_spec", "own_parameters", "prototype", "register", "scalable_softmax", "shifted_sigmoid",
           "sigmoid", "softmax", "softplus", "softplus_shift", "stable_log"]
