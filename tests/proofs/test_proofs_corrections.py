"""The quantities and statements added by theory/mathematics/statements/corrections.py."""

from itertools import permutations

import numpy as np

from attnbounds.theory.mathematics import registry
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax
from attnbounds.theory.mathematics.quantities import compute


def test_cross_weights_match_their_definition():
    rng = np.random.default_rng(0)
    for N in (1, 2, 3, 5):
        inst = Instance.from_logits(rng.normal(size=(4, 7)), softmax(), N=N)
        got = compute("C_other", inst)
        for b in range(inst.B):
            sel = np.flatnonzero(inst.mask[b])
            want = [sum(inst.alpha[b, j] * inst.alpha[b, k] for j, k in permutations([s for s in sel if s != i], 2))
                    for i in sel]
            assert np.allclose(got[b, sel], want, rtol=1e-12, atol=0)  # one value per selected column
        assert (got[inst.mask] >= 0).all()


def test_corrected_ids_follow_the_naming_rule():
    ids = registry.ids()
    for sid in ids:
        if sid.endswith(",corrected]"):
            printed = sid.replace(",corrected]", "]")
            assert printed in ids, f"{sid} corrects {printed}, which is not registered"
