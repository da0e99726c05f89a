"""Normalisers given as Python callables, and statements about one normaliser.

A user's torch function ``fn(logits, T) -> weights`` (rows along the last axis; ``logits`` a float64 tensor of
shape ``(B, L)``, ``T`` a float or a ``(B, 1)`` tensor) becomes a :class:`CallableNormaliser`: the search
evaluates it in float64 through torch, and a Jacobian quantity differentiates it with autograd. It has no
interval version, so nothing about it can be certified: a violation found is REFUTED *in float arithmetic only*
(the record says ``certified: false`` and gives the float margin), a statement that holds is at most VERIFIED,
and every hypothesis computed from a normaliser's ``log F`` (``softmax``, ``F-positive``,
``F-length-independent``) fails on it (unknown, never assumed): such instances are NOT-APPLICABLE.

Every call is guarded (:meth:`CallableNormaliser._call`):

- the function gets copies of ``logits`` and ``T`` (in-place writes such as ``logits /= T`` change nothing the
  search holds);
- it runs in a worker thread with a time limit of :data:`CALL_SECONDS` per call; a call over it is a failure, and
  the function is not called again in this process (the thread cannot be stopped);
- its output must be a CPU ``torch.Tensor`` (or a numpy array) of real **float64** weights of the logits' shape,
  finite. Float32 (and other dtypes) are refused: weights accurate to float32 only would make rounding read as
  violations of a float64 search. Complex output is refused, never cut to its real part; lists, strings,
  objects, meta and sparse tensors are refused naming their type.

Anything else is a :class:`~attnbounds.theory.mathematics.errors.CallableFailed`: refused (:class:`InvalidArgument`) when the
callable is loaded, counted and named by the search otherwise (a VERIFIED then becomes UNDECIDED). A callable
whose autograd Jacobian differs from finite differences when it is loaded (its output computed through numpy,
``.detach()``-ed or under ``torch.no_grad``) is refused for statements that read a Jacobian
(:func:`check_autograd`); finite differences are never substituted for it.

With a ``log F`` (a sympy expression in ``l``, ``L`` and its parameters) the callable is a ratio normaliser
``F(l_i) / sum_j F(l_j)`` (:class:`Declared`): :func:`ratio_from_callable` checks it against that formula on
random logits when it is loaded, and the search and the certifier then read the formula. But the verdict must
hold for the callable: :class:`Confirmer` re-evaluates the callable on a spread over the statement's whole
ranges before the search (long rows, large logits, extreme temperatures, token classes written out) and on the
search's candidates and tightest instances after it. A disagreement beyond rounding refuses ``log F`` for the
run: the statement is then judged as a callable without ``log F`` (:func:`judged_by_callable`), and the record
says why (``log_F_refused``).

:func:`same_normaliser` is the hypothesis ``normaliser(<name>)`` of a statement about one normaliser: an
instance satisfies it when its normaliser *is* that one (the same ``log F``, the same function object, or the
same built-in map), whatever its temperature.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import numpy as np

from attnbounds.theory.mathematics.errors import CallableFailed, InvalidArgument, NotApplicable
from attnbounds.theory.mathematics.normalisers import FORMS, Normaliser, RatioNormaliser, check_logits
from attnbounds.theory.mathematics.hypotheses import Hypothesis, kept_along_growths
from attnbounds.theory.mathematics.quantities import QUANTITIES
from attnbounds.theory.mathematics.statement import Statement
from attnbounds.theory.mathematics.validation import positive

if TYPE_CHECKING:
    from torch import Tensor

#: the most logits (rows times tokens) a callable is evaluated on at once: token classes are written out token by
#: token for it (the search draws fewer rows of long classes), and a longer class instance is skipped (NOT-APPLICABLE)
MAX_EXPANDED = 1 << 20
#: random logit rows a callable is checked on when loaded (shape, finiteness, permutation equivariance, log F)
CHECKS = 24
#: relative agreement required between a callable and its log F (plus rounding of log F's magnitude, see :func:`_agree`)
RTOL = 1e-9
#: seconds one call of a user's function may take
CALL_SECONDS = 10.0
#: the temperatures and logit scales of the spread a declared callable is confirmed on (the search draws T in
#: [1e-4, 1e3] and logits up to 1e3 in absolute value)
SPREAD_T = (1e-4, 1e-2, 0.3, 1.0, 10.0, 1e3)
SPREAD_SCALES = (1e-3, 1.0, 5.0, 20.0, 60.0, 200.0, 1e3)
#: dense lengths of the spread (within the statement's range of L), and the token-class lengths written out for it
SPREAD_L = (1, 2, 3, 7, 64, 101, 257, 1024, 4096)
SPREAD_CLASS_L = (10**4, 10**5, MAX_EXPANDED)
#: what :func:`check_autograd` compares: autograd against central differences of this step, to this tolerance
FD_STEP, FD_RTOL = 1e-6, 1e-3


def _torch() -> Any:
    import torch

    return torch


class CallState:
    """What is known about one user function, shared by its normaliser objects (every temperature): why its
    autograd Jacobian cannot be trusted (``off_graph``), and whether a call ran over its time limit
    (``stalled``: it is never called again)."""

    def __init__(self) -> None:
        self.off_graph: str | None = None
        self.stalled: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"off_graph": self.off_graph, "stalled": None}  # another process may call it again


class CallableNormaliser(Normaliser):
    """``fn(logits, T)`` as a normaliser (module docstring). Its parameters: the temperature ``T`` only."""

    #: whether the weights sum to one is not known: certificates take the weights as they are
    normalising = False
    lacks = {"ball": "a Python callable has no interval version: certified in float only (the given weights as they are)",
             "relaxed": "a Python callable has no log F for the relaxation prover to read"}

    def __init__(self, name: str, fn: Callable[..., Any], T: Any = 1.0, state: CallState | None = None):
        self.name = name
        self.fn = fn
        self.T = positive("T", T)
        self.state = state if state is not None else CallState()

    @property
    def params(self) -> dict[str, Any]:
        return {"T": self.T}

    def _with(self, params: dict[str, Any]) -> "Normaliser":
        return CallableNormaliser(self.name, self.fn, state=self.state, **params)

    def __repr__(self) -> str:
        return f"CallableNormaliser({self.name!r}, T={self.T!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CallableNormaliser) and other.fn is self.fn and repr(other) == repr(self)

    def __hash__(self) -> int:
        return hash(repr(self))

    # no log F: positivity and length independence are unknown, so Normaliser's answer (False) stands and the
    # hypotheses computed from them fail

    def _T_tensor(self, B: int, dtype: Any) -> float | Tensor:
        torch = _torch()
        T = np.asarray(self.T, dtype=np.float64)
        return float(T) if T.ndim == 0 else torch.as_tensor(np.broadcast_to(T, (B,)).copy(), dtype=dtype)[:, None]

    def _fail(self, lg: Any, what: str) -> CallableFailed:
        return CallableFailed(f"normaliser {self.name!r} {what} (logits of shape {tuple(lg.shape)})")

    def _call(self, lg: Tensor) -> Tensor:
        """``fn`` on copies of a ``(B, L)`` tensor and of T, in a worker thread under :data:`CALL_SECONDS`; its
        output checked (:meth:`_output`) and returned as a float64 tensor. Failures: :class:`CallableFailed`."""
        torch = _torch()
        if self.state.stalled:
            raise self._fail(lg, f"is not called again: {self.state.stalled}")
        T = self._T_tensor(lg.shape[0], lg.dtype)
        args = (lg.clone(), T.clone() if isinstance(T, torch.Tensor) else T)
        done: dict[str, Any] = {}
        grad = torch.is_grad_enabled()  # grad mode is per thread: the worker runs in the caller's

        def work() -> None:
            try:
                with torch.set_grad_enabled(grad):
                    done["out"] = self.fn(*args)
            except BaseException as exc:  # noqa: BLE001 - the user's function failed: reported below
                done["exc"] = exc

        worker = threading.Thread(target=work, name=f"attnbounds-normaliser-{self.name}", daemon=True)
        worker.start()
        worker.join(CALL_SECONDS)
        if worker.is_alive():
            self.state.stalled = f"a call ran over its time limit of {CALL_SECONDS:g} s"
            raise self._fail(lg, f"ran over its time limit of {CALL_SECONDS:g} s per call")
        if "exc" in done:
            exc = done["exc"]
            if isinstance(exc, KeyboardInterrupt):
                raise exc
            raise self._fail(lg, f"raised {type(exc).__name__}: {str(exc)[:200]}") from None
        return self._output(done["out"], lg)

    def _output(self, out: Any, lg: Tensor) -> Tensor:
        """The function's output as a float64 tensor, or :class:`CallableFailed` naming what is wrong with it."""
        torch = _torch()
        if isinstance(out, np.ndarray):
            if out.dtype != np.float64:
                raise self._fail(lg, f"returned a numpy array of dtype {out.dtype}; it must return float64 weights"
                                     + (" (complex values are never cut to their real part)" if
                                        np.iscomplexobj(out) else ""))
            out = torch.from_numpy(np.ascontiguousarray(out))
        elif not isinstance(out, torch.Tensor):
            raise self._fail(lg, f"returned {type(out).__name__} {_short(out)}; it must return a torch.Tensor of "
                                 f"float64 weights, one per logit")
        elif out.layout != torch.strided or out.device.type != "cpu":
            raise self._fail(lg, f"returned a {out.layout} tensor on device {out.device.type!r}; it must return a "
                                 f"dense CPU tensor of float64 weights")
        if out.is_complex():
            raise self._fail(lg, f"returned complex weights ({out.dtype}); weights must be real (the imaginary part "
                                 f"is never dropped)")
        if out.dtype != torch.float64:
            raise self._fail(lg, f"returned {out.dtype} weights; it must return float64 weights" + (
                " (compute in float64, as the logits come: float32 weights are accurate to about 1e-7 only, and that "
                "rounding would read as violations)" if out.dtype.is_floating_point else ""))
        if tuple(out.shape) != tuple(lg.shape):
            raise self._fail(lg, f"returned weights of shape {tuple(out.shape)}; it must return one weight per logit "
                                 f"(rows along the last axis)")
        return out

    def _expand(self, lg: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token classes written out token by token, and per class the position of its first token (which
        stands for the class: the map is permutation-equivariant, so equal logits get equal weights)."""
        counts = np.asarray(counts, dtype=np.int64)
        B, K = counts.shape
        L = int(counts[0].sum())
        if B * L > MAX_EXPANDED:
            raise NotApplicable(f"normaliser {self.name!r} is a Python callable: token classes are written out for it, "
                                f"and {B} rows of L = {L} tokens exceed {MAX_EXPANDED} logits")
        column = np.repeat(np.tile(np.arange(K), B), counts.ravel()).reshape(B, L)
        firsts = np.minimum(np.cumsum(counts, axis=-1) - counts, L - 1)
        return np.take_along_axis(lg, column, -1), firsts

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        torch = _torch()
        lg = check_logits(logits)
        dense, firsts = (lg, None) if counts is None else self._expand(lg, counts)
        t = torch.as_tensor(dense, dtype=torch.float64)
        with torch.no_grad():
            w = self._call(t).detach().numpy()
        if not np.all(np.isfinite(w)):
            bad = np.argwhere(~np.isfinite(w))[0]
            T = np.asarray(self.T, dtype=np.float64).ravel()
            raise self._fail(t, f"returned non-finite weights ({float(w[tuple(bad)])!r} at row {bad[0]}, token {bad[1]}; "
                                f"T = {float(T[min(bad[0], T.size - 1)]):.6g})")
        if firsts is None:
            return w
        return np.where(np.asarray(counts) > 0, np.take_along_axis(w, firsts, -1), 0.0)

    def jacobian(self, logits: Any) -> np.ndarray:
        """``J[b, i, j] = d alpha_i / d l_j`` by autograd (rows are independent: one Jacobian of the summed rows)."""
        torch = _torch()
        lg = torch.as_tensor(check_logits(logits), dtype=torch.float64)
        try:
            J = torch.autograd.functional.jacobian(lambda z: self._call(z).sum(0), lg, vectorize=True)  # (L, B, L)
        except CallableFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - autograd through the user's function failed (an in-place write
            raise self._fail(lg, f"has no autograd Jacobian here ({type(exc).__name__}: {str(exc)[:200]})") from None
        out = J.permute(1, 0, 2).detach().numpy()
        if not np.all(np.isfinite(out)):
            raise self._fail(lg, "has an autograd Jacobian that is not finite on these logits")
        return out

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        if counts is not None:
            raise NotApplicable(f"normaliser {self.name!r} (a Python callable) takes dense logits in torch")
        lg = logits if logits.ndim == 2 else logits[None, :]
        return self._call(lg)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_callable(fn: Any, name: str, where: str, *, seed: int = 0, state: CallState | None = None) -> CallState:
    """Refuse (:class:`InvalidArgument`, naming ``where``) a callable that is not a usable normaliser: it must take
    ``(logits, T)`` and return finite float64 weights of the logits' shape (module docstring), and be
    permutation-equivariant (the weights follow the logits, not their positions: token classes rely on it).
    Returns its :class:`CallState`, with :func:`check_autograd`'s finding."""
    if not callable(fn):
        raise InvalidArgument(f"{where}: a normaliser must be a callable fn(logits, T) -> weights, a built-in name, "
                              f"a table with 'log_F', or a RatioNormaliser; got {type(fn).__name__}")
    rng = np.random.default_rng(seed)
    n = CallableNormaliser(name, fn, 1.0, state)
    try:
        for k in range(CHECKS // 3):
            L = int(rng.integers(1, 9))
            T = float(10 ** rng.uniform(-1, 1))
            logits = rng.uniform(-4, 4, (3, L))
            w = n._with({"T": T}).weights(logits)
            perm = rng.permutation(L)
            wp = n._with({"T": T}).weights(logits[:, perm])
            if not np.allclose(wp, w[:, perm], rtol=1e-9, atol=1e-12):
                raise InvalidArgument(f"{where}: normaliser {name!r} is not permutation-equivariant (permuting the "
                                      f"logits {np.round(logits[0], 3).tolist()} does not permute the weights): the "
                                      f"weights must depend on the logits, not on their positions")
        n.state.off_graph = check_autograd(n)
    except (NotApplicable, CallableFailed) as exc:
        raise InvalidArgument(f"{where}: {exc}") from None
    return n.state


def check_autograd(n: CallableNormaliser) -> str | None:
    """Why the autograd Jacobian of ``n`` cannot be trusted (None when it matches central finite differences at a
    fixed row of well-separated logits): an output computed through numpy, ``.detach()``-ed or under
    ``torch.no_grad`` has a Jacobian of exactly 0."""
    logits = np.array([[-1.3, -0.4, 0.6, 1.7]])
    at = n._with({"T": 0.7})
    try:
        auto = at.jacobian(logits)[0]
    except CallableFailed as exc:
        return f"its autograd Jacobian cannot be computed at logits {logits[0].tolist()}, T = 0.7 ({exc})"
    fd = np.empty_like(auto)
    for j in range(logits.shape[1]):
        step = np.zeros_like(logits)
        step[0, j] = FD_STEP
        fd[:, j] = (at.weights(logits + step)[0] - at.weights(logits - step)[0]) / (2 * FD_STEP)
    scale = float(np.abs(fd).max())
    if np.abs(auto - fd).max() <= FD_RTOL * scale + 1e-9:
        return None
    return (f"its autograd Jacobian (largest entry {np.abs(auto).max():.3g}) differs from finite differences "
            f"(largest entry {scale:.3g}) at logits {logits[0].tolist()}, T = 0.7: the output does not depend on "
            f"the logits through autograd (computed through numpy, .detach()-ed or under torch.no_grad?)")


def refuse_off_graph(statement_bindings: Iterable[str], proto: Normaliser, where: str) -> None:
    """Refuse a statement that reads a Jacobian of a callable whose autograd Jacobian cannot be trusted."""
    if not isinstance(proto, CallableNormaliser) or proto.state.off_graph is None:
        return
    used = sorted(q for q in set(statement_bindings) if QUANTITIES[q].autograd)
    if used:
        raise InvalidArgument(f"{where}: the statement reads {', '.join(used)}, the Jacobian of normaliser "
                              f"{proto.name!r} by autograd, but {proto.state.off_graph}; return weights computed "
                              f"with torch operations on the logits given")


def ratio_from_callable(fn: Any, ratio: RatioNormaliser, where: str, *, seed: int = 0) -> CallState:
    """Refuse a callable that disagrees with the ``log F`` it is declared with, at random logits, lengths and
    temperatures (its other parameters at their values); returns its :class:`CallState`."""
    state = check_callable(fn, ratio.name, where, seed=seed)
    rng = np.random.default_rng(seed + 1)
    n = CallableNormaliser(ratio.name, fn, 1.0, state)
    for _ in range(CHECKS):
        L = int(rng.integers(1, 40))
        T = float(10 ** rng.uniform(-1, 1))
        logits = np.round(rng.uniform(-3, 3, (1, L)), 3)
        problem = disagreement(n, ratio, logits, None, T)
        if problem is not None:
            raise InvalidArgument(f"{where}: {problem}")
    return state


def _rtol(ratio: RatioNormaliser, logits: np.ndarray, counts: np.ndarray | None, T: float) -> np.ndarray:
    """Per row, the relative agreement asked of a callable and its log F: :data:`RTOL`, plus the rounding of
    ``log F``'s magnitude (a weight ``exp(log F_i - max log F)`` carries that absolute error in its exponent)."""
    L = int(logits.shape[1] if counts is None else np.asarray(counts)[0].sum())
    with np.errstate(all="ignore"):
        lf = np.abs(RatioNormaliser(ratio.name, ratio.log_F, {**ratio.values, "T": T}).log_F_values(logits, L))
    lf = np.where(np.isfinite(lf), lf, 0.0)
    return RTOL + 2.0**-40 * np.maximum(1.0, lf.max(-1, keepdims=True))


#: how :func:`disagreement` begins when the callable failed (rather than gave other weights)
FAILS = "the callable fails"


def disagreement(n: CallableNormaliser, ratio: RatioNormaliser, logits: np.ndarray, counts: np.ndarray | None,
                 T: float, expected: np.ndarray | None = None) -> str | None:
    """Why the callable ``n`` and its declared ``ratio`` give different weights on these logits (rounding
    allowed, :func:`_rtol`), or None when they agree. ``expected``: the weights the search used (default: the
    ratio's). A failure of the callable is a disagreement; logits the ratio itself cannot weigh are skipped."""
    try:
        want = ratio._with({**ratio.values, "T": T}).weights(logits, counts) if expected is None else expected
    except NotApplicable:
        return None
    L = int(logits.shape[1] if counts is None else np.asarray(counts)[0].sum())
    where = f"at L = {L}, T = {T:.6g}"
    try:
        got = n._with({"T": T}).weights(logits, counts)
    except CallableFailed as exc:
        return f"{FAILS} where log_F = {ratio.log_F} gives weights, {where}: {exc}"
    err = np.abs(got - want)
    bad = err > _rtol(ratio, logits, counts, T) * np.abs(want) + 1e-300
    if counts is not None:
        bad &= np.asarray(counts) > 0
    if not bad.any():
        return None
    b, j = (int(v) for v in np.argwhere(bad)[0])
    row = np.round(logits[b], 4).tolist()
    shown = f"{row[:8]}{'...' if len(row) > 8 else ''}"
    if counts is not None:
        shown += f" (class counts {np.asarray(counts)[b].tolist()[:8]})"
    return (f"the callable and log_F = {ratio.log_F} disagree {where}, logits {shown}: token {j} has weight "
            f"{float(got[b, j])!r} from the callable but {float(want[b, j])!r} from log_F (parameters "
            f"{ {k: float(np.asarray(v).ravel()[0]) for k, v in ratio.values.items()} })")


def other_weights(again: np.ndarray, alpha: np.ndarray, counts: np.ndarray | None, rtol: float = 0.0) -> float | None:
    """The largest difference between the weights a normaliser gave again on an instance's logits (``again``) and the
    weights the instance carries (``alpha``), over the token classes that hold tokens; None when they are the same
    there (bit for bit, or within ``rtol`` of ``again`` relative). A class of no tokens (count 0) weighs nothing,
    whatever its column carries: splitting a batch of class instances at the top-N boundary gives rows that need no
    split a column of count 0 holding a copy of another column's weight, where the callable's weights are 0."""
    again, alpha = np.asarray(again, dtype=np.float64), np.asarray(alpha, dtype=np.float64)
    if again.shape != alpha.shape:
        return float("inf")
    with np.errstate(invalid="ignore"):
        same = np.isclose(alpha, again, rtol=rtol, atol=0.0)
    if counts is not None:
        same |= np.asarray(counts) <= 0
    if same.all():
        return None
    with np.errstate(invalid="ignore"):
        diff = np.abs(np.where(same, 0.0, again - alpha))
    return float(np.nanmax(diff)) if np.isfinite(diff).all() else float("inf")


@dataclasses.dataclass(frozen=True, eq=False)  # hashed by identity: the user's function need not be hashable
class Declared:
    """A normaliser declared with both a ``log F`` and its torch function: its constructor makes the ratio
    normaliser (what the search and the certifier read); :class:`Confirmer` holds the verdict to the function."""

    name: str
    fn: Callable[..., Any]
    ratio: Callable[..., RatioNormaliser]
    state: CallState = dataclasses.field(default_factory=CallState)

    def __call__(self, **overrides: Any) -> RatioNormaliser:
        return self.ratio(**overrides)

    def as_callable(self, **overrides: Any) -> CallableNormaliser:
        """The function alone, as a normaliser without log F (its temperature only)."""
        bad = set(overrides) - {"T"}
        if bad:
            raise InvalidArgument(f"normaliser {self.name!r} judged as a Python callable has the parameter T only, "
                                  f"got {sorted(bad)}")
        return CallableNormaliser(self.name, self.fn, overrides.get("T", self.ratio().params.get("T", 1.0)), self.state)


class SameNormaliser:
    """The check of ``normaliser(<name>)``: the instance's normaliser is ``proto`` (any temperature); the
    hypothesis's ``names`` (:class:`attnbounds.theory.mathematics.hypotheses.NamedNormaliser`)."""

    def __init__(self, proto: Normaliser, declared: Declared | None = None):
        self.proto = proto
        #: the torch function declared with proto's log F, whose verdicts it must confirm (:class:`Confirmer`)
        self.declared = declared
        #: whether a violation on this normaliser can be certified in interval arithmetic
        self.certifiable = not isinstance(proto, CallableNormaliser)

    def same(self, n: Normaliser | None) -> bool:
        p = self.proto
        if n is None or type(n) is not type(p) or getattr(n, "name", None) != getattr(p, "name", None):
            return False
        if isinstance(p, RatioNormaliser) and isinstance(n, RatioNormaliser):
            return bool(n.log_F == p.log_F)
        if isinstance(p, CallableNormaliser) and isinstance(n, CallableNormaliser):
            return n.fn is p.fn
        return True

    def __call__(self, inst: Any) -> np.ndarray:
        ok = np.full(inst.B, self.same(inst.normaliser))
        if ok.any() and isinstance(self.proto, RatioNormaliser):  # its other parameters at their values
            for name, value in self.proto.values.items():
                if name != "T":
                    got = np.asarray(inst.normaliser.values.get(name, np.nan), dtype=np.float64)
                    ok &= np.broadcast_to(got, (inst.B,)) == np.broadcast_to(np.asarray(value, dtype=np.float64), (inst.B,))
        return ok


def same_normaliser(name: str, proto: Normaliser, declared: Declared | None = None, *, torch: bool = False) -> Hypothesis:
    """The hypothesis ``normaliser(<name>)`` (module docstring); ``torch``: a torch function was declared with
    ``proto``'s log F (as ``declared`` says; a record's replay, which has no function, says it so)."""
    kind = ("a Python callable without log F: never certified" if isinstance(proto, CallableNormaliser) else
            f"log F = {proto.log_F}" + (", and its torch function" if declared or torch else "")
            if isinstance(proto, RatioNormaliser) else f"the built-in {type(proto).__name__}")
    others = {k: v for k, v in proto.params.items() if k != "T"} if isinstance(proto, RatioNormaliser) else {}
    fixed = (", its other parameters at " + ", ".join(f"{k} = {float(np.ravel(v)[0]):g}" for k, v in sorted(others.items()))
             if others else "")
    same = SameNormaliser(proto, declared)
    return Hypothesis(f"normaliser({name})", f"the weights come from the normaliser {name!r} ({kind}), at any "
                      f"temperature{fixed}", same, relax=_relax_rule(name, proto), exact=True, normaliser="form",
                      names=same, along_growths=kept_along_growths)  # a growth keeps the normaliser


def _relax_rule(name: str, proto: Normaliser) -> Any:
    """The relaxation reads a ratio normaliser's log F with its parameters (T free); a built-in map whose weights
    reach every point of the closed simplex (:attr:`Normaliser.reaches_simplex`) relaxes as the simplex itself, where
    nothing else bounds them; an element-wise map (:attr:`Normaliser.elementwise`) by its own log F, each weight F
    itself; a Python callable, or another map not of the form F / sum F, has none."""
    if proto.reaches_simplex:
        others = {k: v for k, v in proto.params.items() if k != "T"}
        return lambda space: space.whole_simplex(f"the weights of {name} reach every point of the closed simplex",
                                                 proto.threshold_power, lambda T: proto._with({**others, "T": T}))
    if proto.elementwise and proto.has("relaxed"):  # alpha_i = F(l_i): the map itself at each temperature
        others = {k: float(np.ravel(np.asarray(v, dtype=np.float64))[0]) for k, v in proto.params.items() if k != "T"}
        log_f = getattr(proto, FORMS["relaxed"])
        return lambda space: space.normaliser(log_f, others, f"{name}, element-wise, log alpha_i = {log_f}",
                                              name=name, elementwise=lambda T: proto._with({**others, "T": T}))
    if not isinstance(proto, RatioNormaliser):
        return None
    values = {k: float(np.ravel(np.asarray(v, dtype=np.float64))[0]) for k, v in proto.values.items()}
    return lambda space: space.normaliser(proto.log_F, values, f"{name}, log F = {proto.log_F}", name=proto.name)


def _declared(statement: Statement) -> tuple[int, Declared] | None:
    for k, h in enumerate(statement.hypotheses):
        declared = None if h.names is None else h.names.declared
        if isinstance(declared, Declared):
            return k, declared
    return None


class LogFRefused(Exception):
    """The callable disagrees with its declared log F on an instance of this run (:class:`Confirmer`);
    ``failed``: it failed there (an instance of the statement's range the function cannot weigh)."""

    @property
    def failed(self) -> bool:
        return str(self).startswith(FAILS)


class Confirmer:
    """Holds the verdicts about a :class:`Declared` normaliser to its torch function (module docstring):
    :meth:`spread` before the search, :meth:`check` on the instances a verdict rests on; both raise
    :class:`LogFRefused` naming the first disagreement. ``checked`` counts the instances compared, ``longest``
    the longest of them."""

    def __init__(self, statement: Statement, declared: Declared):
        self.statement, self.declared = statement, declared
        self.callable = declared.as_callable()
        self.checked = 0
        self.longest = 0

    @staticmethod
    def of(statement: Statement) -> "Confirmer | None":
        found = _declared(statement)
        return None if found is None else Confirmer(statement, found[1])

    def reaches(self, inst: Any) -> bool:
        """Whether the callable can be evaluated on ``inst`` (its token classes written out)."""
        return inst.logits is not None and inst.B * inst.L <= MAX_EXPANDED

    def _compare(self, logits: np.ndarray, counts: np.ndarray | None, T: float, ratio: RatioNormaliser,
                 expected: np.ndarray | None = None) -> None:
        problem = disagreement(self.callable, ratio, logits, counts, T, expected)
        self.checked += logits.shape[0]
        self.longest = max(self.longest, int(logits.shape[1] if counts is None else np.asarray(counts)[0].sum()))
        if problem is not None:
            raise LogFRefused(problem)

    def check(self, instances: Iterable[Any]) -> None:
        """Compare the callable with the weights each instance carries (those the search and certifier read)."""
        for inst in instances:
            if inst is None or not self.reaches(inst) or not isinstance(inst.normaliser, RatioNormaliser):
                continue
            for b in range(inst.B):
                one = inst.take(b)
                T = float(np.asarray(one.normaliser.params["T"]).ravel()[0])
                values = {k: np.asarray(v).ravel()[0] for k, v in one.normaliser.params.items()}
                self._compare(one.logits, one.counts, T, one.normaliser._with(values), expected=one.alpha)

    def spread(self, seed: int = 0) -> None:
        """Compare the callable with its log F over the statement's whole ranges (module docstring)."""
        st = self.statement
        rng = np.random.default_rng([seed, 7])
        ratio = self.declared()
        L_lo, L_hi = (int(np.ceil(st.ranges["L"][0])), int(np.floor(st.ranges["L"][1]))) if "L" in st.ranges \
            else (1, 10**12)
        if "T" in st.fixed:
            temperatures = [float(st.fixed["T"])]
        elif "T" in st.ranges:
            lo, hi = st.ranges["T"]
            temperatures = sorted({float(lo), float(hi), float(np.sqrt(lo * hi)), *(t for t in SPREAD_T if lo <= t <= hi)})
        else:
            temperatures = list(SPREAD_T)
        bound = float(st.fixed["a"]) if "a" in st.fixed and st.fixed["a"] > 0 else None
        scales = [s for s in SPREAD_SCALES if bound is None or s <= bound] + ([bound] if bound else [])
        dense = sorted({L for L in (*SPREAD_L, L_lo, min(L_hi, SPREAD_L[-1])) if L_lo <= L <= min(L_hi, SPREAD_L[-1])})
        classes = sorted({L for L in (*SPREAD_CLASS_L, min(L_hi, MAX_EXPANDED)) if max(L_lo, SPREAD_L[-1] + 1) <= L
                          <= min(L_hi, MAX_EXPANDED)})
        for T in temperatures:
            for L in dense:
                rows = [rng.standard_normal(L) * s for s in scales] + [rng.uniform(-s, s, L) for s in scales]
                rows.append(rng.choice([-1e3, 1e3, 999.0, -999.0, 0.0], L) if bound is None else
                            rng.choice([-bound, bound, 0.0], L))
                logits = np.array(rows)
                if bound is not None:
                    logits = np.clip(logits, -bound, bound)
                self._compare(logits, None, T, ratio)
            for L in classes:
                for s in scales:
                    levels = np.array([[s, -s], [-s, s], [s, 0.0]])
                    counts = np.array([[1, L - 1], [1, L - 1], [L // 2, L - L // 2]])
                    for b in range(3):
                        self._compare(levels[b:b + 1], counts[b:b + 1], T, ratio)

    def summary(self) -> dict[str, Any]:
        """What the record says about the confirmation (``callable_check``)."""
        return {"normaliser": self.declared.name, "instances": int(self.checked), "longest_L": int(self.longest),
                "note": "the callable agreed with log_F on these instances (a spread over the statement's ranges, the "
                        "candidates and the tightest instances); claims for longer contexts (limits) rest on log_F"}


@contextlib.contextmanager
def judged_by_callable(statement: Statement) -> Iterator[Statement]:
    """The statement about a :class:`Declared` normaliser, about its torch function alone (no log F: searched in
    float, never certified); inside the block the normaliser's name builds the callable."""
    from attnbounds.theory.mathematics.normalisers import constructors_added

    found = _declared(statement)
    if found is None:
        raise InvalidArgument(f"{statement.id}: not a statement about a normaliser declared with a torch function")
    k, declared = found
    hyps = list(statement.hypotheses)
    hyps[k] = same_normaliser(declared.name, declared.as_callable())
    with constructors_added({declared.name: declared.as_callable}):
        yield dataclasses.replace(statement, hypotheses=tuple(hyps))
