"""The normaliser family: closed-form Jacobians vs autograd, stability, computed hypotheses, bad input."""

import inspect
import zlib

import numpy as np
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as hs
import pytest

from attnbounds.theory.mathematics import normalisers as nz
from attnbounds.theory.mathematics.errors import AttnBoundsError

torch = pytest.importorskip("torch")

ALL = sorted(nz.CONSTRUCTORS)


def _autograd_jacobian(n, logits):
    out = []
    for row in logits:
        t = torch.tensor(row, dtype=torch.float64)
        out.append(torch.autograd.functional.jacobian(lambda z: n.torch_weights(z[None])[0], t).numpy())
    return np.stack(out)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("T", [0.3, 1.0, 7.0])
def test_closed_form_jacobian_matches_autograd(name, T):
    rng = np.random.default_rng(zlib.crc32(f"{name}{T}".encode()))
    n = nz.make(name, T=T)
    logits = rng.normal(size=(4, 6)) * 2 + (3.0 if n.needs_positive_logit else 0.0)
    np.testing.assert_allclose(n.jacobian(logits), _autograd_jacobian(n, logits), atol=1e-12, rtol=1e-9)
    np.testing.assert_allclose(n.weights(logits), n.torch_weights(torch.tensor(logits)).numpy(), atol=1e-14)


@pytest.mark.parametrize("name", [n for n in ALL if not nz.prototype(n).needs_positive_logit])
@pytest.mark.parametrize("T", [1e-4, 1e-2, 1.0, 1e3])
def test_stable_at_extreme_temperatures_and_logits(name, T):
    logits = np.array([[1e3, -1e3, 999.9, 0.0], [-1e3, -1e3, -999.0, -1e3], [1e-300, 0.0, -1e-300, 5e-324]])
    with np.errstate(over="raise", divide="raise", invalid="raise"):  # underflow to 0 is harmless
        a = nz.make(name, T=T).weights(logits)
        J = nz.make(name, T=T).jacobian(logits)
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(J))
    if nz.make(name).normalising:
        np.testing.assert_allclose(a.sum(-1), 1.0, rtol=0, atol=1e-12)


def test_softmax_matches_textbook_formula():
    logits = np.array([[0.1, -2.0, 3.0]])
    e = np.exp(logits / 0.7)
    np.testing.assert_allclose(nz.softmax(0.7).weights(logits), e / e.sum(), rtol=1e-15)


def test_softmax_without_a_temperature_is_the_plain_softmax() -> None:
    """``softmax()`` is ``F = exp(l)``: temperature 1, the specification's default (``nz.make("softmax")``)."""
    logits = np.array([[0.1, -2.0, 3.0], [0.0, 0.0, 0.0]])
    e = np.exp(logits)
    np.testing.assert_allclose(nz.softmax().weights(logits), e / e.sum(-1, keepdims=True), rtol=1e-15)
    np.testing.assert_array_equal(nz.softmax().weights(logits), nz.make("softmax").weights(logits))


def test_hypotheses_are_computed_not_declared():
    assert nz.softmax().positive and nz.softmax().length_independent
    assert nz.softplus_shift().positive and nz.exp_poly().positive and nz.shifted_sigmoid().positive
    assert nz.scalable_softmax().positive and not nz.scalable_softmax().length_independent
    for n in (nz.ReluNormalised(), nz.Sparsemax(), nz.Entmax15(), nz.SigmoidAttention()):
        assert not n.positive
    assert not nz.SigmoidAttention().normalising
    # F = exp(log F) is positive only where log F is finite for every real l: a log F with a pole or a logarithm of
    # l is not, whatever its name says
    for log_F in (sp.log(nz.l_sym), -1 / nz.l_sym**2, sp.log(nz.l_sym**2), sp.log(nz.l_sym - 3)):
        assert not nz.RatioNormaliser("softmax", log_F, {}).positive, log_F
    assert nz.RatioNormaliser("mine", -nz.l_sym**2 + sp.sin(nz.l_sym), {}).positive
    # a user-built F with L inside is detected, whatever its name says
    sneaky = nz.RatioNormaliser("softmax", nz.l_sym * nz.L_sym, {})
    assert not sneaky.length_independent


@pytest.mark.parametrize("fn, name", [(nz.softmax, "softmax"), (nz.softplus_shift, "softplus"),
                                      (nz.exp_poly, "exp_poly"), (nz.shifted_sigmoid, "shifted_sigmoid"),
                                      (nz.scalable_softmax, "ssmax")])
def test_ratio_constructors_build_their_specification(fn, name):
    """The public constructors (positional parameters) and the registered specifications: the same normaliser, the
    same defaults, the parameters in the same order (T first: the order of repr, equality and the records)."""
    spec = nz.CONSTRUCTORS[name]
    assert isinstance(spec, nz.RatioSpec) and spec.name == name
    assert fn() == spec() and repr(fn()) == repr(nz.make(name)) and fn().log_F == spec.log_F
    defaults = {k: v.default for k, v in inspect.signature(fn).parameters.items()}
    assert defaults == {p.name: p.default for p in spec.parameters}
    assert list(spec().params) == [p.name for p in spec.parameters] and spec.parameters[0] is nz.TEMPERATURE


def test_every_builtin_is_a_registered_specification():
    assert [s.name for s in nz.BUILTIN] == list(nz.CONSTRUCTORS) and nz.BUILTIN_NAMES == frozenset(nz.CONSTRUCTORS)
    assert all(nz.CONSTRUCTORS[s.name] is s for s in nz.BUILTIN)
    with pytest.raises(AttnBoundsError, match="already registered"):
        nz.register(nz.BUILTIN[0])


def test_added_constructors_are_withdrawn_with_their_capabilities():
    with nz.constructors_added({"relu": nz.softmax}):  # a name replaced inside the block only
        assert not nz.prototype("relu").needs_positive_logit and nz.own_parameters("relu") == ()
    assert nz.prototype("relu").needs_positive_logit and nz.make("relu") == nz.ReluNormalised()


def test_F_range_includes_interior_extrema():
    n = nz.exp_poly(b=0.1, T=1.0)  # log F = l - 0.1 l^2, maximal at l = 5
    lo, hi = n.log_F_range(np.array([10.0, 2.0]))
    np.testing.assert_allclose(hi, [2.5, 2 - 0.4])
    np.testing.assert_allclose(lo, [-20.0, -2.4])


@pytest.mark.parametrize("log_F, increasing", [
    (sp.log(2 + nz.sigmoid(nz.l_sym / sp.Symbol("T"))), True),  # the sign shows only once sigmoid is rewritten
    (sp.log(2 - sp.tanh(nz.l_sym)), False),
])
def test_F_range_of_a_monotone_F_whose_slope_sign_needs_rewriting_is_at_the_ends(log_F, increasing):
    """(log F)' of constant sign that sympy's assumptions do not decide (no polynomial either): decided once rewritten
    through exp, so F's extremes on [-a, a] are its values at the ends, not an error."""
    n = nz.RatioNormaliser("monotone", log_F, {"T": 1.0})
    a = np.array([3.0, 0.5])
    lo, hi = n.log_F_range(a)
    ends = n.log_F_values(np.stack([-a, a], axis=1))
    np.testing.assert_allclose(lo, ends[:, 0] if increasing else ends[:, 1])
    np.testing.assert_allclose(hi, ends[:, 1] if increasing else ends[:, 0])


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_temperature_is_named(bad):
    with pytest.raises(AttnBoundsError, match="T"):
        nz.softmax(bad)


def test_bad_logits_and_unknown_name():
    with pytest.raises(AttnBoundsError, match="finite"):
        nz.softmax().weights(np.array([[0.0, np.nan]]))
    with pytest.raises(AttnBoundsError, match="dimensions"):
        nz.softmax().weights(np.zeros((2, 2, 2)))
    with pytest.raises(AttnBoundsError, match="unknown normaliser 'softmaks'"):
        nz.make("softmaks")
    with pytest.raises(AttnBoundsError, match="relu"):
        nz.ReluNormalised().weights(np.array([[-1.0, -2.0]]))


# -- the entmax package (Peters, Niculae, Martins) as an independent reference --------------------------
@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
@settings(max_examples=40, deadline=None)
@given(data=hs.data())
def test_sparse_maps_match_the_entmax_package(name: str, data: hs.DataObject) -> None:
    """Our float kernels against ``entmax.sparsemax`` / ``entmax.entmax15`` (float64), including rows of
    large equal logits at tiny T (z ~ 1e7): a kernel that does not shift by the row maximum loses the mass."""
    entmax = pytest.importorskip("entmax")
    torch = pytest.importorskip("torch")
    L = data.draw(hs.integers(1, 1024))
    T = data.draw(hs.sampled_from([1e-4, 1e-2, 0.5, 1.0, 30.0]))
    rng = np.random.default_rng(data.draw(hs.integers(0, 2**32 - 1)))
    base = data.draw(hs.sampled_from([0.0, 832.3, -500.0]))
    logits = base + rng.standard_normal((3, L)) * data.draw(hs.sampled_from([1e-6, 1e-3, 1.0, 100.0]))
    ours = nz.make(name, T=T).weights(logits)
    ref_fn = entmax.sparsemax if name == "sparsemax" else entmax.entmax15
    ref = ref_fn(torch.tensor(logits / T, dtype=torch.float64), dim=-1).numpy()
    np.testing.assert_allclose(ours.sum(-1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-12)


def test_sparsemax_keeps_the_mass_of_large_nearly_equal_logits() -> None:
    """The case from the issue: logits near 832.3 at T = 1e-4 over 1024 tokens (z ~ 8e6). Without the shift
    by the row maximum the cumulative sums lose the spread and the weights sum to 1 - 6e-6."""
    lg = 832.3 + np.random.default_rng(1).standard_normal((1, 1024)) * 1e-7
    w = nz.make("sparsemax", T=1e-4).weights(lg)
    np.testing.assert_allclose(w.sum(), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(nz.make("sparsemax", T=1e-4).weights(np.full((1, 1024), 832.3)), 1 / 1024, rtol=1e-12)
