"""The boundary of the hypotheses (:mod:`attnbounds.theory.deciding.boundary`): named cases, and a batch read row by row
gives what each row alone gives (the search asks about whole batches, the verdict about single instances)."""

import numpy as np
from hypothesis import given, settings, strategies as hs

from attnbounds.theory.deciding.boundary import BOUNDARIES, boundaries, interior
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax

TIE, ZERO = BOUNDARIES[2], BOUNDARIES[3]


def test_named_cases() -> None:
    logits = np.array([[3.0, 1.0, 1.0, 0.0],    # interior with N = 2: 1 < 3 selected, 1 = 1 tied
                       [3.0, 2.0, 1.0, 0.0],    # interior
                       [0.0, 0.0, 0.0, 0.0]])   # every weight ties
    x = np.ones((3, 4, 2))
    x[1, 3] = 0.0  # a zero token vector in row 1
    inst = Instance.from_logits(logits, softmax(1.0), x=x, N=2)
    assert boundaries(inst) == [[TIE], [ZERO], [TIE]]
    assert interior(inst).tolist() == [False, False, False]
    assert boundaries(Instance.from_logits(logits[1:2], softmax(1.0), x=np.ones((1, 4, 2)), N=2)) == [[]]
    assert boundaries(Instance.from_logits(logits, softmax(1.0), N=4)) == [["N = L"]] * 3
    assert boundaries(Instance.from_logits(np.zeros((2, 1)), softmax(1.0), N=1)) == [["L = 1", "N = L"]] * 2
    q, k = np.array([[0.0, 0.0], [1.0, 0.0]]), np.ones((2, 3, 2))
    assert boundaries(Instance.from_qk(q, k, softmax(1.0))) == [[ZERO], []]


def test_the_top_n_boundaries_are_boundaries_only_of_a_statement_that_reads_the_selection() -> None:
    """``alpha_max > 1/L`` has no N: an instance's N (the search may draw one) is no hypothesis of it, so equal logits
    at N = L or a tie at the top N are interior; a statement about the selected tokens keeps both boundaries."""
    from attnbounds.theory.mathematics import registry
    from attnbounds.theory.running import api

    no_n = api.statement("alpha_max > 1/L", hypotheses=["softmax"], id="no_n").statements[0]
    assert not no_n.reads_selection and registry.get("theorem2.upper[full]").reads_selection
    tied = Instance.from_logits(np.zeros((1, 3)), softmax(1.0), N=1)
    full = Instance.from_logits(np.zeros((1, 3)), softmax(1.0), N=3)
    assert boundaries(tied) == [[TIE]] and boundaries(full) == [["N = L"]]
    assert boundaries(tied, no_n.reads_selection) == [[]] and boundaries(full, no_n.reads_selection) == [[]]
    assert interior(full, selection=False).tolist() == [True]


@settings(max_examples=60, deadline=None)
@given(hs.integers(1, 5), hs.integers(1, 6), hs.data())
def test_a_batch_reads_like_its_rows(B: int, L: int, data: hs.DataObject) -> None:
    """Logits and vectors from few values (ties and zeros are common), dense or token classes."""
    values = hs.sampled_from([0.0, 1.0, -1.0, 2.5])
    logits = np.array(data.draw(hs.lists(hs.lists(values, min_size=L, max_size=L), min_size=B, max_size=B)))
    x = np.array(data.draw(hs.lists(hs.lists(hs.lists(values, min_size=2, max_size=2), min_size=L, max_size=L),
                                    min_size=B, max_size=B)))
    N = data.draw(hs.integers(1, L))
    counts = data.draw(hs.none() | hs.lists(hs.integers(0, 3), min_size=L, max_size=L).filter(lambda c: sum(c) >= N))
    inst = Instance.from_logits(logits, softmax(1.0), x=x, N=N,
                                counts=None if counts is None else np.tile(counts, (B, 1)))
    rows = [boundaries(inst.take(b))[0] for b in range(B)]
    assert boundaries(inst) == rows
    assert interior(inst).tolist() == [not r for r in rows]
