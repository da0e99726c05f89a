"""Every registered normaliser's forms against each other, and its specification against itself.

For each normaliser (the built-in ones and the test-only map of ``tests/smoothed_normaliser.py``, registered for
this module): every form of :data:`~attnbounds.theory.mathematics.normalisers.FORMS` is there or listed in its
``lacks`` with the reason (never both, never neither: a missing form fails here, it does not fall back); the float
weights agree with the token classes written out, the torch form with the float one, the closed-form Jacobian with
autograd of the torch form, the ball form (arb, 128 bits) encloses the float weights, and the relaxed form (the
sympy ``log F``) gives the float ``log F`` kernel's values and weights. Its parameters' test ranges lie in their
domains, the constructor accepts them and refuses values outside the domain.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Iterator

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as hs

from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.mathematics import balls, families, hypotheses, strategies
from attnbounds.theory.mathematics import normalisers as nm
from attnbounds.theory.mathematics.errors import AttnBoundsError, InvalidArgument
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers.ratio import log_F_map
from attnbounds.theory.mathematics.intervals import Unsupported, backend
from attnbounds.theory.mathematics.statement import Citation, Statement
from tests import smoothed_normaliser

torch = pytest.importorskip("torch")

SPECS = {s.name: s for s in (*nm.BUILTIN, smoothed_normaliser.SPEC)}
EPS = 2.0**-52
#: logit rows (a near tie, a dominant token, large logits, equal logits), every row with a positive logit (relu)
ROWS = np.array([[0.3, -1.2, 2.0, 2.0 + 1e-9, -0.4], [9.0, 0.1, -0.2, 0.5, 0.0], [40.0, -35.0, 12.5, 39.0, 1.0],
                 [0.7, 0.7, 0.7, 0.7, 0.7]])
COUNTS = np.array([[1, 3, 2, 1, 4], [2, 1, 1, 5, 2], [1, 1, 3, 2, 4], [4, 1, 1, 1, 4]])  # every row: L = 11


@pytest.fixture(autouse=True, scope="module")
def _registered() -> Iterator[None]:
    with nm.constructors_added({smoothed_normaliser.SPEC.name: smoothed_normaliser.SPEC}):  # the registration
        yield


def _each(name: str) -> list[Any]:
    """The normaliser at two temperatures, its own parameters at the ends of their test ranges."""
    spec = SPECS[name]
    out = []
    for T, end in ((1.0, 0), (0.3, 1)):
        out.append(spec(T=T, **{p.name: p.test[end] for p in spec.own}))
    return out


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_form_is_there_or_says_why(name: str) -> None:
    for n in _each(name):
        assert set(n.lacks) <= set(nm.FORMS), f"{name}: lacks unknown forms {set(n.lacks) - set(nm.FORMS)}"
        for form in nm.FORMS:
            if form in n.lacks:
                assert not n.has(form), f"{name} has a {form} form but lists it as missing"
                assert isinstance(n.lacks[form], str) and len(n.lacks[form]) > 20, f"{name}: say why it lacks {form}"
            else:
                assert n.has(form), f"{name} has no {form} form and does not say why (Normaliser.lacks)"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_parameters_domains_and_test_ranges(name: str) -> None:
    spec = SPECS[name]
    assert spec.name == name and nm.make(name).name == name
    assert {p.name for p in spec.parameters} == set(nm.make(name).params), f"{name}: parameters differ from the map's"
    assert {p.name for p in spec.own} == nm.constructor_parameters(name) == {p.name for p in nm.own_parameters(name)}
    for p in spec.parameters:
        lo, hi = p.domain
        assert lo < p.test[0] < p.test[1] < hi, f"{name}.{p.name}: test range {p.test} not inside {p.domain}"
        assert p.test[0] <= p.default <= p.test[1], f"{name}.{p.name}: default {p.default} outside {p.test}"
        if p.stress is not None:
            assert p.test[0] <= p.stress[0] < p.stress[1] <= p.test[1], f"{name}.{p.name}: stress outside its tests"
        for value in (*p.test, p.default, *((lo,) if p.closed else ())):  # a closed domain holds its end
            spec(**{p.name: value})
        for bad in (((-1.0,) if p.closed else (lo, -1.0)) if lo == 0 else ()) + (np.nan, np.inf):
            with pytest.raises(InvalidArgument, match=p.name):
                spec(**{p.name: bad})
    with pytest.raises(TypeError):
        spec(not_a_parameter=1.0)


def _autograd(n: Any, logits: np.ndarray) -> np.ndarray:
    rows = [torch.autograd.functional.jacobian(lambda z: n.torch_weights(z[None])[0], torch.tensor(r)).numpy()
            for r in logits]
    return np.stack(rows)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_float_torch_and_jacobian_forms_agree(name: str) -> None:
    for n in _each(name):
        a = n.weights(ROWS)
        assert a.shape == ROWS.shape and np.all(np.isfinite(a)) and np.all(a >= 0)
        if n.normalising:
            np.testing.assert_allclose(a.sum(-1), 1.0, rtol=0, atol=1e-12)
        np.testing.assert_allclose(n.torch_weights(torch.tensor(ROWS)).numpy(), a, rtol=1e-12, atol=1e-15)
        moderate = ROWS[:2] / 4
        np.testing.assert_allclose(n.jacobian(moderate), _autograd(n, moderate), rtol=1e-9, atol=1e-12)
        # token classes: column k stands for counts[k] equal tokens
        classes = n.weights(ROWS, COUNTS)
        dense = np.stack([n.weights(np.repeat(r, m)[None])[0] for r, m in zip(ROWS, COUNTS)])
        first = [np.concatenate([[0], np.cumsum(m)[:-1]]) for m in COUNTS]
        np.testing.assert_allclose(classes, np.stack([d[f] for d, f in zip(dense, first)]), rtol=1e-12, atol=1e-15)
        if n.torch_classes:
            np.testing.assert_allclose(n.torch_weights(torch.tensor(ROWS), COUNTS).numpy(), classes, rtol=1e-12,
                                       atol=1e-15)
        else:
            with pytest.raises(AttnBoundsError):
                n.torch_weights(torch.tensor(ROWS), COUNTS)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_ball_form_encloses_the_float_weights(name: str) -> None:
    ops = backend("arb")
    for n in _each(name):
        for counts in (None, COUNTS[:1]):
            inst = Instance.from_logits(ROWS[:1], n, counts=counts)
            with ops.precision(128):
                ex = balls.ball_instance(inst, ops)
            if "ball" in n.lacks:  # certified on the given weights, said so
                assert ex.weights.startswith("given weights")
                if n.normalising:
                    assert any("taken as given" in note for note in ex.notes)
                with pytest.raises(Unsupported):
                    balls.weights_from_logits(ex, ex.logits)
                continue
            assert ex.weights.startswith("recomputed")
            for b, f in zip(ex.alpha, inst.alpha[0]):
                slack = 64 * EPS * abs(f) + 1e-300
                assert ops.lower_float(b) - slack <= f <= ops.upper_float(b) + slack, (name, ops.text(b), f)
                width = ops.upper_float(b) - ops.lower_float(b)  # doubles rounded outward
                assert width <= 4 * EPS * abs(f) + 1e-300, f"{name}: ball {ops.text(b)} is not tight"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_relaxed_form_gives_the_float_log_F(name: str) -> None:
    """The sympy log F at 30 digits against the float kernels, and the weights it gives: ``F / sum F``, or ``F``
    itself for an element-wise map (sigmoid attention)."""
    for n in _each(name):
        if "relaxed" in n.lacks:
            continue
        L = ROWS.shape[1]
        kernels = log_F_map(n)
        assert kernels is not None, name
        values = {s: sp.Float(float(kernels.values[s.name]), 30) for s in n.log_F.free_symbols
                  if s.name in kernels.values}
        expr = n.log_F.xreplace(values).subs(nm.L_sym, L)
        exact = np.array([[float(expr.subs(nm.l_sym, sp.Float(float(v), 30)).evalf(30)) for v in row] for row in ROWS])
        np.testing.assert_allclose(kernels.log_F_values(ROWS), exact, rtol=1e-12, atol=1e-12)
        if n.elementwise:
            np.testing.assert_allclose(n.weights(ROWS), np.exp(exact), rtol=1e-11, atol=1e-300)
            continue
        w = np.exp(exact - exact.max(-1, keepdims=True))
        np.testing.assert_allclose(n.weights(ROWS), w / w.sum(-1, keepdims=True), rtol=1e-11, atol=1e-15)


class _Undeclared(nm.SimplexMap):
    """A map with float forms only that does not say why it has no ball form."""

    name = "undeclared"

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        lg = nm.check_logits(logits)
        return np.full(lg.shape, 1.0 / lg.shape[1])


def test_a_map_without_a_ball_form_or_a_reason_is_declined_not_certified() -> None:
    n = _Undeclared()
    assert not n.has("ball") and "ball" not in n.lacks
    with pytest.raises(Unsupported, match="no ball form"):
        balls.ball_instance(Instance.from_logits(ROWS[:1], n), backend("arb"))


@settings(max_examples=30, deadline=None)
@given(data=hs.data())
def test_a_new_map_is_drawn_and_certified_without_touching_a_name_list(data: hs.DataObject) -> None:
    """The test-only map, registered, is drawn by the strategies with its own parameter over its test range, found
    admissible from its capabilities (the simplex hypothesis is computed on its weights), and its weights are
    recomputed in balls by its ball form."""
    st = Statement("mine.smoothed", "weights at most one", sp.Le(sp.Symbol("alpha_max", real=True), 1),
                   Citation("mine"), hypotheses=(hypotheses.SIMPLEX,), bindings={"alpha_max": "alpha_max"})
    assert "smoothed" in families.admissible_normalisers(st) and "smoothed" in strategies._admissible(None)
    assert "relu" not in strategies._admissible(None)  # its weights need a positive logit: drawn only when named
    n = data.draw(strategies.normalisers(st).filter(lambda n: n.name == "smoothed"))
    assert 1e-2 <= n.c <= 1e2 and 1e-4 <= n.T <= 1e3
    inst = Instance.from_logits(ROWS[:1], n)
    ex = balls.ball_instance(inst, backend("arb"))
    assert ex.weights == "recomputed from the logits (given) by Smoothed smoothed"
    assert certify(st, inst).status == "holds"


@pytest.mark.parametrize("log_F", ["l/T", "l/T - l**2/8", "-l/T"], ids=["increasing", "interior-max", "decreasing"])
def test_the_extrema_of_log_F_over_a_ball_of_a_cover_every_a_in_it(log_F: str) -> None:
    """``F_extrema`` with ``a`` known only to a ball [A0, A1] (a parameter certified as an interval): the enclosures of
    ``min log F`` and ``max log F`` over ``[-a, a]`` hold the extremes at every a of the ball, the widest box's too
    (``max_{|l| <= A1} log F``), not only those at A0."""
    import mpmath

    from attnbounds.theory.mathematics import normalisers as nm
    from attnbounds.theory.mathematics.balls import F_extrema
    from attnbounds.theory.mathematics.intervals import backend

    T_ = sp.Symbol("T", positive=True)
    expr = sp.sympify(log_F, locals={"l": nm.l_sym, "T": T_})
    normaliser = nm.RatioNormaliser("test", expr, {"T": 1.0})
    f = sp.lambdify(nm.l_sym, expr.subs(T_, 1), "mpmath")
    for name in ("arb", "mpmath"):
        ops = backend(name)
        for A0, A1 in ((1.0, 1.5), (2.0, 6.0), (0.25, 0.5)):
            lo, hi = F_extrema(ops, normaliser, 5, ops.hull(ops.num(A0), ops.num(A1)))
            for A in (A0, (A0 + A1) / 2, A1):
                grid = [f(mpmath.mpf(A) * k / 400) for k in range(-400, 401)]
                assert ops.to_fraction(ops.upper(hi)) >= Fraction(float(max(grid))) - Fraction(1, 10**12), (name, A)
                assert ops.to_fraction(ops.lower(lo)) <= Fraction(float(min(grid))) + Fraction(1, 10**12), (name, A)
