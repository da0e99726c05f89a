"""The top-N selection and the selected columns: the O(L) kernels select exactly what a stable sort selects.

``top_n_mask`` partitions instead of sorting and ``column_sets`` scatters instead of sorting; both must give the
same booleans and indices as the stable sort they replace, on ties, signed zeros, infinities and NaN.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as hs

from attnbounds.theory.mathematics.instance import top_n_mask
from attnbounds.theory.mathematics.quantities._float import column_sets

#: values that tie, compare equal while differing (signed zeros), or sort specially
SPECIAL = [0.0, -0.0, 1.0, 0.5, 2.0, 1e-300, np.inf, -np.inf, np.nan]


def _sorted_top_n(alpha: np.ndarray, N: int) -> np.ndarray:
    order = np.argsort(-alpha, axis=-1, kind="stable")[:, :N]
    mask = np.zeros(alpha.shape, dtype=bool)
    np.put_along_axis(mask, order, True, axis=-1)
    return mask


@hs.composite
def weight_rows(draw: hs.DrawFn) -> np.ndarray:
    B, L = draw(hs.integers(1, 5)), draw(hs.integers(1, 24))
    values = hs.sampled_from(SPECIAL) | hs.floats(-3, 3) | hs.integers(0, 2).map(float)
    return np.array(draw(hs.lists(values, min_size=B * L, max_size=B * L))).reshape(B, L)


@settings(max_examples=300, deadline=None)
@given(alpha=weight_rows(), data=hs.data())
def test_top_n_mask_selects_what_a_stable_sort_selects(alpha: np.ndarray, data: hs.DataObject) -> None:
    N = data.draw(hs.integers(0, alpha.shape[1] + 1))
    assert np.array_equal(top_n_mask(alpha, N), _sorted_top_n(alpha, N))


@settings(max_examples=300, deadline=None)
@given(mask=hs.integers(1, 5).flatmap(lambda B: hs.integers(1, 24).flatmap(
    lambda L: hs.lists(hs.booleans(), min_size=B * L, max_size=B * L).map(lambda v: np.array(v).reshape(B, L)))))
def test_column_sets_list_the_selected_columns_in_order(mask: np.ndarray) -> None:
    cols, valid = column_sets(mask)
    count = mask.sum(-1)
    S = max(int(count.max()), 1)
    order = np.argsort(~mask, axis=-1, kind="stable")[:, :S]
    want_valid = np.arange(S)[None, :] < count[:, None]
    assert np.array_equal(valid, want_valid)
    assert np.array_equal(cols, np.where(want_valid, order, order[:, :1]))
