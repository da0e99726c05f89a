"""``attnbounds.profile``: which of the paper's limits does a normaliser escape? (issue 34, item 2).

For logits bounded by ``a`` (every ``l_i`` in ``[-a, a]``) at temperature ``T`` (defaults :data:`DEFAULT_A`,
:data:`DEFAULT_T`, both settable), a profile is a table of rows, each a best constant certified by
:func:`attnbounds.tighten` (PROVED on one side, REFUTED with a certified counterexample on the other) or saying why
a side is open::

    import attnbounds
    p = attnbounds.profile("softmax", a=1, T=1)      # or "ssmax", "sparsemax", a RatioNormaliser, a torch function
    print(p)                                         # the table; p.rows, p.to_json(), p.write_plot("curve.png")
    c = attnbounds.profile.compare(["softmax", "ssmax", "sparsemax"])   # see :func:`compare`

The rows (:data:`ROWS`):

* **vanishing attention** (Lemma 1): the best constants of ``L*alpha_max <= C`` and ``L*alpha_min >= C`` over
  every L (``a`` and ``T`` fixed); then the verdict on whether ``alpha_max`` can stay above a constant as L grows
  (``vanish.escape``), by this criterion, each case certified by its record:

  - *falls like 1/L* when ``L*alpha_max <= C`` is PROVED for a finite C (the record of the first row): every
    weight is at most C/L for every L;
  - *escapes* when ``alpha_max <= c`` is REFUTED for a c > 0 (half the float ``alpha_max`` of the worst logits at
    the largest L computed) by a counterexample whose margin is certified negative **for every L >= L0** along a
    growth of its token classes (:mod:`attnbounds.theory.deciding.limits`): for every L >= L0 some logits in
    ``[-a, a]`` give a weight above c;
  - otherwise *not settled*: the row says what was found (a REFUTED at one L only, a verdict only VERIFIED) and
    the float curve's rate ``alpha_max ~ L^-p`` of the worst logits (float64, not certified).

* **gradient** (Lemma 2, Corollary 3): the best constants of the Jacobian's entry, row, Frobenius and spectral norms
  (``J_entry``, ``J_row``, ``J_frobenius``, ``J_spectral``) as ``J_x <= C/T`` over every T (``a`` fixed): where the
  upper side is PROVED the 1/T scaling is certified (``J_spectral`` through its upper bounds, Schur's test and
  interlacing). Where no constant is PROVED over every T (the prover declines the normaliser, or an upper bound of
  ``J_spectral`` is loose at its worst case; sparsemax, entmax-1.5 and sigmoid attention
  have no ``log F``), the row is the bracket of ``J_x <= C`` at the given T instead, and says so.

The worst-logits curve (one token at +a, the other L - 1 at -a, computed with the normaliser's float form, token
classes up to L = 10^9) is kept with the profile; :meth:`Profile.write_plot` draws it against L with the certified
bound C/L of the first row beside it (matplotlib; without it the plot is skipped with a message).

A torch function ``fn(logits, T) -> weights`` is profiled in float64 only: its rows are labelled ``float only``
and no verdict is certified (a violation is float64 only, a bound at most VERIFIED).

* **collapse** (Theorem 1): the part of Theorem 1 about the normaliser alone, the mass ``abar_N`` of the N
  largest weights: the best C of ``L*abar_N <= C*N`` over every L and N (the relaxation prover has no coordinate
  for N, so its upper side stays open: VERIFIED at most). The rest of Theorem 1 and Theorem 2 read token vectors
  and embeddings besides the weights: they have no row.
"""

from __future__ import annotations

import dataclasses
import html
import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from attnbounds.theory.mathematics.errors import AttnBoundsError, InvalidArgument

#: the default logit bound a (every logit in [-a, a])
DEFAULT_A = 1.0
#: the default temperature
DEFAULT_T = 1.0
#: the default budget of one check (calibrated seconds): a profile runs about 20 to 30 checks per normaliser
DEFAULT_BUDGET = 0.5
#: the most checks of one row's tighten
DEFAULT_MAX_CHECKS = 6
#: the relative width a row's bracket is narrowed to
DEFAULT_RTOL = 1e-4
#: the lengths of the worst-logits curve (token classes: exact counts, no L-sized arrays)
CURVE_L = tuple(int(v) for v in np.unique(np.round(np.logspace(0, 9, 37)).astype(np.int64)))
#: the longest L of the worst-logits curve a first guess of L*alpha_max is read at
GUESS_L = 10_000
#: the most checks of the attempt to PROVE a Jacobian row's 1/T scaling over every T (then the row is at the given T)
EVERY_T_CHECKS = 4
#: the shortest L the escape check searches at (a weight above c at a short context says nothing about growth)
ESCAPE_L = 1000
#: the longest L a torch function's curve is computed at (dense logits)
CALLABLE_CURVE_L = 1 << 14
#: the normalisers ``compare`` profiles by default, each with the registry names it may have: the paper's
#: alternatives (Sparsemax, Scalable-Softmax, Self-Adjusted Softmax) and more; a name not in the registry is
#: reported as missing, never profiled from a stand-in
COMPARE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("softmax", ("softmax",)),
    ("Scalable-Softmax", ("ssmax",)),
    ("sparsemax", ("sparsemax",)),
    ("entmax-1.5", ("entmax15",)),
    ("sigmoid attention", ("sigmoid",)),
    ("softpick", ("softpick",)),
    ("Self-Adjusted Softmax", ("sa_softmax",)),
)


@dataclass(frozen=True)
class RowSpec:
    """One row of a profile: ``key``, the title shown, and the Jacobian quantity (for the gradient rows)."""

    key: str
    title: str
    group: str
    quantity: str | None = None


ROWS: tuple[RowSpec, ...] = (
    RowSpec("vanish.max", "L*alpha_max <= C, every L", "vanishing attention"),
    RowSpec("vanish.min", "L*alpha_min >= C, every L", "vanishing attention"),
    RowSpec("vanish.escape", "alpha_max above a constant as L grows?", "vanishing attention"),
    RowSpec("collapse.mass", "L*abar_N <= C*N (top-N mass), every L, N", "collapse (Theorem 1)"),
    RowSpec("grad.entry", "J_entry (max |d alpha_i/d l_j|)", "gradient", "J_entry"),
    RowSpec("grad.row", "J_row (largest row norm)", "gradient", "J_row"),
    RowSpec("grad.frobenius", "J_frobenius", "gradient", "J_frobenius"),
    RowSpec("grad.spectral", "J_spectral", "gradient", "J_spectral"),
)
ROW_KEYS = tuple(r.key for r in ROWS)


@dataclass(frozen=True)
class RecordRef:
    """A record a row rests on: its role (``proved``, ``refuted``, ``check``), id, verdict and content hash."""

    role: str
    id: str
    verdict: str
    content_hash: str
    certified: bool = True

    def text(self) -> str:
        return f"{self.verdict} {self.id} ({self.content_hash[:16]})" + ("" if self.certified else " float only")

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "id": self.id, "verdict": self.verdict, "content_hash": self.content_hash,
                "certified": self.certified}


@dataclass(frozen=True)
class ProfileRow:
    """One row: the relation tightened (or checked), its verdict (``PROVED`` when the bound is proved at the
    bracket's proved side, else the best verdict there: ``VERIFIED``, ``UNDECIDED``; ``REFUTED`` for an escape
    certified by a counterexample; ``ERROR`` / ``NOT-APPLICABLE`` when the check could not run), the bracket
    ``[lower, upper]`` with its exact sides, ``finding`` (the answer in words), ``reason`` (why a side is open or how
    the search stopped), the records, and the whole tighten or check as JSON (``detail``)."""

    key: str
    title: str
    group: str
    relation: str
    verdict: str
    lower: float | None
    upper: float | None
    lower_exact: str | None
    upper_exact: str | None
    proved_side: str | None
    finding: str
    reason: str
    records: tuple[RecordRef, ...]
    checks: int
    seconds: float
    certified: bool = True
    detail: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)

    def _light(self) -> dict[str, Any]:
        return {k: v for k, v in self.to_json().items() if k != "detail"}

    def bracket_text(self, digits: int = 7) -> str:
        """``[lower, upper]``, each side marked P (PROVED there) or R (REFUTED there), ``open`` without a record."""
        from attnbounds.theory.io.profiles import bracket_text

        return bracket_text(self._light(), digits)

    def cell(self) -> str:
        """The row's short text in a comparison table: the bracket, the verdict and the finding."""
        from attnbounds.theory.io.profiles import cell

        return cell(self._light())

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "group": self.group, "relation": self.relation,
                "verdict": self.verdict, "lower": self.lower, "upper": self.upper, "lower_exact": self.lower_exact,
                "upper_exact": self.upper_exact, "proved_side": self.proved_side, "finding": self.finding,
                "reason": self.reason, "records": [r.to_json() for r in self.records], "checks": self.checks,
                "seconds": self.seconds, "certified": self.certified,
                "detail": None if self.detail is None else dict(self.detail)}


@dataclass(frozen=True)
class Curve:
    """``alpha_max`` of the worst logits (one token at +a, the rest at -a) against L, in float64."""

    L: tuple[int, ...]
    alpha_max: tuple[float, ...]
    how: str

    def rate(self) -> float | None:
        """``p`` with ``alpha_max ~ L^-p`` over the last decade of the curve (float64, not certified)."""
        pts = [(L, v) for L, v in zip(self.L, self.alpha_max) if v > 0 and math.isfinite(v)]
        if len(pts) < 2:
            return None
        (L1, v1), (L2, v2) = pts[-1], next(((L, v) for L, v in reversed(pts) if L <= pts[-1][0] / 10), pts[0])
        if L1 == L2:
            return None
        return -math.log(v1 / v2) / math.log(L1 / L2)

    def to_json(self) -> dict[str, Any]:
        return {"L": list(self.L), "alpha_max": list(self.alpha_max), "how": self.how, "rate": self.rate()}


@dataclass(frozen=True)
class Profile:
    """A normaliser's profile (module docstring): ``rows`` (:class:`ProfileRow`), the settings, the worst-logits
    curve. ``str(p)`` is the table in text; Jupyter shows it as Markdown / HTML; ``to_json()`` holds everything,
    every tighten and its records included."""

    normaliser: str
    description: str
    a: float
    T: float
    params: Mapping[str, float]
    certified: bool
    budget_s: float
    seed: int
    rtol: float
    max_checks: int
    rows: tuple[ProfileRow, ...]
    curve: Curve | None
    seconds: float
    notes: tuple[str, ...] = ()

    def row(self, key: str) -> ProfileRow:
        for r in self.rows:
            if r.key == key:
                return r
        raise KeyError(f"no row {key!r} in this profile; rows: {', '.join(r.key for r in self.rows)}")

    def heading(self) -> str:
        params = ", ".join(f"{k} = {v:g}" for k, v in sorted(self.params.items()))
        return (f"profile of {self.normaliser} ({self.description}{'; ' + params if params else ''}): logits in "
                f"[-a, a] with a = {self.a:g}, T = {self.T:g}" + ("" if self.certified else
                "; FLOAT ONLY: a Python function, no verdict is certified") +
                f"; budget {self.budget_s:g} s per check, at most {self.max_checks} checks per row, rtol "
                f"{self.rtol:g}, seed {self.seed}; {self.seconds:.0f} s")

    def __str__(self) -> str:
        lines = [self.heading()]
        width = max(len(r.title) for r in self.rows) if self.rows else 10
        for r in self.rows:
            lines.append(f"  {r.title.ljust(width)}  {r.verdict:<10} {r.bracket_text()}  {r.finding}")
            if r.reason:
                lines.append(f"  {''.ljust(width)}  why: {' '.join(r.reason.split())[:300]}")
            for ref in r.records:
                lines.append(f"  {''.ljust(width)}  record: {ref.text()}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def markdown(self) -> str:
        """The profile as a Markdown table (row, verdict, bracket, finding, records, why)."""
        from attnbounds.theory.io.profiles import md as cell

        lines = [f"**{cell(self.heading())}**", "", "| row | verdict | bracket [lower, upper] | finding | records | why a "
                 "side is open |", "|---|---|---|---|---|---|"]
        for r in self.rows:
            refs = "; ".join(f"{ref.verdict} `{ref.id}` ({ref.content_hash[:12]})" for ref in r.records) or "none"
            lines.append(f"| {cell(r.title)} | {r.verdict} | {cell(r.bracket_text())} | {cell(r.finding)} | "
                         f"{cell(refs)} | {cell(r.reason[:240])} |")
        lines += ["", *[f"- {cell(n)}" for n in self.notes]]
        return "\n".join(lines).rstrip() + "\n"

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def html(self) -> str:
        """The profile as an HTML table (escaped)."""
        e = html.escape
        body = "".join(
            f"<tr><td>{e(r.title)}</td><td>{e(r.verdict)}</td><td>{e(r.bracket_text())}</td><td>{e(r.finding)}</td>"
            f"<td>{'<br>'.join(e(ref.text()) for ref in r.records) or 'none'}</td><td>{e(r.reason[:400])}</td></tr>"
            for r in self.rows)
        notes = "".join(f"<li>{e(n)}</li>" for n in self.notes)
        return (f"<div class='attnbounds-profile'><p><b>{e(self.heading())}</b></p><table><tr><th>row</th>"
                f"<th>verdict</th><th>bracket [lower, upper]</th><th>finding</th><th>records</th><th>why a side is "
                f"open</th></tr>{body}</table>{'<ul>' + notes + '</ul>' if notes else ''}</div>")

    def _repr_html_(self) -> str:
        return self.html()

    def to_json(self) -> dict[str, Any]:
        return {"kind": "attnbounds.profile", "normaliser": self.normaliser, "description": self.description,
                "a": self.a, "T": self.T, "params": dict(self.params), "certified": self.certified,
                "budget_s": self.budget_s, "seed": self.seed, "rtol": self.rtol, "max_checks": self.max_checks,
                "seconds": self.seconds, "notes": list(self.notes), "rows": [r.to_json() for r in self.rows],
                "curve": None if self.curve is None else self.curve.to_json()}

    def write_plot(self, path: str | Path) -> str:
        """Write the worst-logits curve with the certified bound C/L beside it as a PNG at ``path``; returns a line
        saying what was written, or why nothing was (no matplotlib, no curve)."""
        return write_plot(self.to_json(), path)


# -- normalisers --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Target:
    """What a profile is about: the label, the argument ``tighten`` / ``check`` take, the float weights, whether it is
    certified, whether the relaxation prover can read it, its parameters besides T."""

    label: str
    description: str
    argument: Any
    weights: Callable[[int], float]
    certified: bool
    relaxed: bool
    params: Mapping[str, float]
    curve_max_L: int


def known_names() -> list[str]:
    from attnbounds.theory.mathematics.normalisers import CONSTRUCTORS

    return sorted(CONSTRUCTORS)


def _check_number(name: str, value: Any, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or (value <= 0 if positive else value < 0):
        raise InvalidArgument(f"profile: {name} must be a finite number {'> 0' if positive else '>= 0'}, got "
                              f"{value!r}")
    return float(value)


def _worst_weight(n: Any, a: float) -> Callable[[int], float]:
    """``alpha_max`` of one token at +a against L - 1 at -a, from the normaliser's float form (token classes)."""
    def at(L: int) -> float:
        if L == 1:
            return float(np.max(n.weights(np.array([[a]]))))
        w = n.weights(np.array([[a, -a]]), counts=np.array([[1.0, float(L - 1)]]))
        return float(np.max(w))
    return at


def _callable_weight(fn: Callable[..., Any], a: float, T: float) -> Callable[[int], float]:
    def at(L: int) -> float:
        import torch

        logits = torch.full((1, L), -a, dtype=torch.float64)
        logits[0, 0] = a
        with torch.no_grad():
            out = fn(logits, T)
        return float(np.max(np.asarray(out.detach().numpy() if hasattr(out, "detach") else out, dtype=np.float64)))
    return at


def _target(normaliser: Any, *, a: float, T: float, params: Mapping[str, float] | None,
            statements: Sequence[str] | None) -> _Target:
    from attnbounds.theory.mathematics.normalisers import (CONSTRUCTORS, BUILTIN_NAMES, Normaliser, RatioNormaliser,
                                                           constructors_added)

    params = dict(params or {})
    if "T" in params:
        raise InvalidArgument("profile: give the temperature as T=..., not in params")
    if isinstance(normaliser, str) and statements:
        from attnbounds.theory.io import userbounds

        user = userbounds.load_all(list(statements), register=False)  # added below for this call only
        if normaliser not in user.normalisers:
            raise InvalidArgument(f"profile: no [[normaliser]] named {normaliser!r} in {', '.join(statements)}; it "
                                  f"declares: {', '.join(sorted(user.normalisers)) or 'none'}")
        with constructors_added(user.normalisers):
            made = CONSTRUCTORS[normaliser]()
        if not isinstance(made, RatioNormaliser):
            raise InvalidArgument(f"profile: the normaliser {normaliser!r} of {', '.join(statements)} is not a ratio "
                                  f"normaliser (log F); pass its torch function from Python instead")
        normaliser = made
    if isinstance(normaliser, str):
        if normaliser not in BUILTIN_NAMES:
            raise InvalidArgument(f"profile: unknown normaliser {normaliser!r}; the built-in ones: "
                                  f"{', '.join(sorted(BUILTIN_NAMES))} (or a statements file's [[normaliser]] with "
                                  f"--statements FILE, or from Python a RatioNormaliser or a torch function)")
        spec = CONSTRUCTORS[normaliser]
        try:
            n = spec(T=T, **params)
        except TypeError as exc:
            raise InvalidArgument(f"profile: {exc}") from None
        description = getattr(spec, "reference", normaliser)
        return _Target(normaliser, description, n, _worst_weight(n, a), True, n.has("relaxed"),
                       {k: float(np.ravel(v)[0]) for k, v in n.params.items() if k != "T"}, CURVE_L[-1])
    if isinstance(normaliser, RatioNormaliser):
        values = {**{k: float(np.ravel(v)[0]) for k, v in normaliser.values.items()}, **params}
        if "T" not in normaliser.values and "T" in {str(s) for s in normaliser.log_F.free_symbols}:
            values["T"] = T
        if "T" in values:
            values["T"] = T
        n = RatioNormaliser(normaliser.name, normaliser.log_F, values)
        return _Target(n.name, f"log F = {normaliser.log_F}", n, _worst_weight(n, a), True, True,
                       {k: v for k, v in values.items() if k != "T"}, CURVE_L[-1])
    if isinstance(normaliser, Normaliser):
        name = getattr(normaliser, "name", "")
        if name in BUILTIN_NAMES:
            own = {k: float(np.ravel(v)[0]) for k, v in normaliser.params.items() if k != "T"}
            return _target(name, a=a, T=T, params={**own, **params}, statements=None)
    if callable(normaliser) and not isinstance(normaliser, type):
        if params:
            raise InvalidArgument("profile: params apply to a built-in or ratio normaliser, not to a torch function")
        name = getattr(normaliser, "__name__", "callable")
        return _Target(f"{name} (torch function)", "a Python torch function, float64 only", normaliser,
                       _callable_weight(normaliser, a, T), False, False, {}, CALLABLE_CURVE_L)
    raise InvalidArgument(f"profile: normaliser must be a built-in name ({', '.join(known_names())}), a "
                          f"RatioNormaliser, a statements file's [[normaliser]] name (statements=...) or a torch "
                          f"function fn(logits, T) -> weights; got {type(normaliser).__name__}")


# -- rows ---------------------------------------------------------------------------------------------------------
def _refs(t: Any) -> tuple[RecordRef, ...]:
    out = []
    for role, rec in (("proved", t.proved), ("refuted", t.refuted)):
        if rec is not None:
            out.append(RecordRef(role, rec.id, rec.verdict, rec.content_hash, bool(rec.certified)))
    return tuple(out)


def _verdict(t: Any, certified: bool) -> str:
    """A tighten row's verdict: of the bound at its proved side (PROVED), else the best seen there."""
    if t.proved is not None:
        return "PROVED"
    verdicts = {s.verdict for s in t.steps}
    for v in ("VERIFIED", "UNDECIDED", "NOT-APPLICABLE", "ERROR"):
        if v in verdicts:
            return v
    return "REFUTED" if t.refuted is not None else "UNDECIDED"


def _open_reason(t: Any, certified: bool) -> str:
    parts = []
    if not certified:
        parts.append("a Python function: float64 only, nothing certified")
    if t.proved is None and t.refuted is None:
        parts.append("no side settled")
    elif t.proved is None:
        parts.append(f"the {t.proved_side} side is open (no constant PROVED)")
    elif t.refuted is None:
        parts.append(f"the {'lower' if t.proved_side == 'upper' else 'upper'} side is open (no constant REFUTED)")
    if not t.converged or parts:
        parts.append(t.reason)
    return "; ".join(p for p in parts if p)


def _tighten_row(spec: RowSpec, relation: str, t: Any, certified: bool, finding: str, extra: str = "",
                 more: tuple[RecordRef, ...] = (), detail: Mapping[str, Any] | None = None) -> ProfileRow:
    reason = _open_reason(t, certified)
    return ProfileRow(spec.key, spec.title, spec.group, relation, _verdict(t, certified), t.lower, t.upper,
                      t.lower_exact, t.upper_exact, t.proved_side, finding,
                      "; ".join(p for p in (extra, reason) if p), _refs(t) + more, t.checks, t.seconds, certified,
                      detail if detail is not None else t.to_json())


def _failed_row(spec: RowSpec, relation: str, exc: Exception, seconds: float) -> ProfileRow:
    verdict = "NOT-APPLICABLE" if type(exc).__name__ == "NotApplicable" else "ERROR"
    return ProfileRow(spec.key, spec.title, spec.group, relation, verdict, None, None, None, None, None,
                      "not run", f"{type(exc).__name__}: {exc}", (), 0, seconds, True, None)


class _Runner:
    """The checks of one profile (settings shared by every row)."""

    def __init__(self, target: _Target, a: float, T: float, budget: float, seed: int, rtol: float, max_checks: int,
                 progress: Callable[[str], None] | None):
        self.target, self.a, self.T = target, a, T
        self.budget, self.seed, self.rtol, self.max_checks = budget, seed, rtol, max_checks
        self.progress = progress

    def say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(f"profile {self.target.label}: {line}")

    def tighten(self, relation: str, fixed: Mapping[str, float], start: float | None = None,
                max_checks: int | None = None) -> Any:
        from attnbounds.theory.running.tighten import tighten

        self.say(f"tighten {relation} ({', '.join(f'{k} = {v:g}' for k, v in fixed.items())})")
        return tighten(relation, "C", hypotheses=["logits-bounded"], fixed=dict(fixed),
                       normaliser=self.target.argument, budget=self.budget, seed=self.seed, rtol=self.rtol,
                       max_checks=self.max_checks if max_checks is None else max_checks, start=start)

    def check(self, relation: str, fixed: Mapping[str, float], ranges: Mapping[str, Any] | None = None) -> Any:
        from attnbounds.theory.running.api import check

        self.say(f"check {relation}" + ("" if not ranges else f" ({ranges})"))
        return check(relation, hypotheses=["logits-bounded"], fixed=dict(fixed), normaliser=self.target.argument,
                     ranges=None if ranges is None else dict(ranges), budget=self.budget, seed=self.seed,
                     id="profile")


def _guess(curve: Curve | None, scale: Callable[[int, float], float], pick: Callable[[Sequence[float]], float]
           ) -> float | None:
    if curve is None:
        return None
    vals = [scale(L, v) for L, v in zip(curve.L, curve.alpha_max) if math.isfinite(v) and v > 0]
    return pick(vals) if vals else None


def _violated_for_every_L(run: _Runner, relation: str, cx: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The growths along which the record's counterexample violates ``relation`` for every L >= L0: its limit analysis
    against the relation over every L (the record's statement ends its range at 10^9 for the search, and the analysis
    stops a violation there), each with ``L_max`` None; [] where none is certified so or the instance cannot be
    read back."""
    from attnbounds.theory.deciding import limits
    from attnbounds.theory.io.serialize import instance_from_json
    from attnbounds.theory.running.api import statement

    try:
        st = statement(relation, hypotheses=["logits-bounded"], fixed={"a": run.a, "T": run.T},
                       normaliser=run.target.argument, id="profile").statements[0]
        inst = st.prepare(instance_from_json(cx["instance"]))
        found = [r.to_json() for r in limits.analyse(st, inst)]
    except AttnBoundsError:
        return []
    return [lim for lim in found if lim.get("status") == "violated-for-all" and lim.get("L_max") is None
            and lim.get("L0") is not None]


def _vanish_rows(run: _Runner, curve: Curve | None, keys: Sequence[str]) -> list[ProfileRow]:
    spec_max, spec_min, spec_escape = ROWS[0], ROWS[1], ROWS[2]
    fixed = {"a": run.a, "T": run.T}
    rows: list[ProfileRow] = []
    t_max = None
    if spec_max.key in keys or spec_escape.key in keys:  # the escape's criterion reads this row's PROVED side
        row, t_max = _max_row(run, spec_max, fixed, curve)
        rows.append(row)
    if spec_min.key in keys:
        rows.append(_min_row(run, spec_min, fixed))
    if spec_escape.key in keys:
        rows.append(_escape_row(run, curve, t_max, spec_escape))
    return rows


def _bracket_row(run: _Runner, spec: RowSpec, rel: str, fixed: Mapping[str, float], start: float | None,
                 proved: Callable[[Any], str], refuted: Callable[[Any], str]) -> tuple[ProfileRow, Any]:
    """A row that is one tighten of ``rel``: its bracket, and what a PROVED side (``proved(t)``), else a REFUTED one
    (``refuted(t)``), says; the row of the failure (and None) when the tighten cannot run."""
    began = time.perf_counter()
    try:
        t = run.tighten(rel, fixed, start=start)
    except AttnBoundsError as exc:
        return _failed_row(spec, rel, exc, time.perf_counter() - began), None
    finding = proved(t) if t.proved is not None else refuted(t) if t.refuted is not None else "no side settled"
    return _tighten_row(spec, rel, t, run.target.certified, finding), t


def _max_row(run: _Runner, spec: RowSpec, fixed: Mapping[str, float], curve: Curve | None
             ) -> tuple[ProfileRow, Any]:
    # first guess: the worst logits' L*alpha_max up to L = 10^4, a length the search reaches (REFUTED, then jumps)
    return _bracket_row(run, spec, "L*alpha_max <= C", fixed,
                        _guess(curve, lambda L, v: L * v if L <= GUESS_L else 0.0, max),
                        lambda t: f"every weight <= {t.upper:.6g}/L for every L",
                        lambda t: f"no 1/L bound below {t.lower:.6g} (REFUTED there); no C PROVED")


def _mass_row(run: _Runner, spec: RowSpec, curve: Curve | None) -> ProfileRow:
    """Theorem 1's part about the normaliser alone: the mass ``abar_N`` of the N largest weights (what the context
    vector keeps of the selected tokens) is at most C N / L for every L and N, or not."""
    return _bracket_row(run, spec, "L*abar_N <= C*N", {"a": run.a, "T": run.T},
                        _guess(curve, lambda L, v: L * v if L <= GUESS_L else 0.0, max),
                        lambda t: f"the top-N mass collapses: abar_N <= {t.upper:.6g} N/L for every L and N",
                        lambda t: f"no N/L bound on the top-N mass below {t.lower:.6g} (REFUTED there); no C PROVED"
                        )[0]


def _min_row(run: _Runner, spec: RowSpec, fixed: Mapping[str, float]) -> ProfileRow:
    rel = "L*alpha_min >= C"
    began = time.perf_counter()
    zero = _float_min_is_zero(run.target, run.a)
    if zero:  # a weight is exactly 0 (a sparse map): one check of alpha_min > 0 refutes every C > 0 at once
        relation = "alpha_min > 0"
        try:
            rec = run.check(relation, fixed)
        except AttnBoundsError as exc:
            return _failed_row(spec, relation, exc, time.perf_counter() - began)
        ref = (RecordRef("refuted" if rec.verdict == "REFUTED" else "check", rec.id, rec.verdict, rec.content_hash,
                         bool(rec.certified)),)
        if rec.verdict == "REFUTED" and rec.certified:
            cx = rec.counterexample or {}
            return ProfileRow(spec.key, spec.title, spec.group, relation, "REFUTED", None, 0.0, None, "0", "lower",
                              f"best C = 0: a weight is exactly 0 (at L = {cx.get('L')}), so L*alpha_min >= C is "
                              f"REFUTED for every C > 0", _ball_note(run.target) + "the side C <= 0 holds trivially "
                              "(weights are >= 0) and has no record of its own", ref, 1,
                              time.perf_counter() - began, True, rec.to_json())
    return _bracket_row(run, spec, rel, fixed, None, lambda t: f"every weight >= {t.lower:.6g}/L for every L",
                        lambda t: f"no C/L lower bound with C >= {t.upper:.6g} (REFUTED there)")[0]


def _float_min_is_zero(target: _Target, a: float) -> bool:
    """Whether the float form gives an exactly zero weight to one token at -a against one at +a."""
    if not target.certified:
        return False
    try:
        return float(np.min(target.argument.weights(np.array([[-a, a]])))) == 0.0
    except Exception:  # noqa: BLE001
        return False


def _ball_note(target: _Target) -> str:
    n = target.argument
    if target.certified and hasattr(n, "has") and not n.has("ball"):
        return (f"{target.label} has no ball form: a counterexample is certified on the instance's given weights "
                f"(its float form's output), not recomputed from the logits; ")
    return ""


def _decimal_below(x: float) -> str:
    """A 3-digit decimal at most ``x`` (> 0), as text."""
    e = math.floor(math.log10(x)) - 2
    q = Fraction(math.floor(x / 10.0 ** e)) * Fraction(10) ** e
    return f"{float(q):.3g}" if q > 0 else f"{x:.3g}"


def _escape_row(run: _Runner, curve: Curve | None, t_max: Any, spec: RowSpec) -> ProfileRow:
    cert = run.target.certified
    rate = None if curve is None else curve.rate()
    rate_text = "" if rate is None else ("; the worst-logits float curve is flat over its last decade (float64)"
                                         if abs(rate) < 1e-3 else f"; the worst-logits float curve falls like "
                                         f"L^-{rate:.3g} over its last decade (float64, not certified)")
    if t_max is not None and t_max.proved is not None and cert:
        return ProfileRow(spec.key, spec.title, spec.group, "L*alpha_max <= C", "PROVED", t_max.lower, t_max.upper,
                          t_max.lower_exact, t_max.upper_exact, t_max.proved_side,
                          f"no: falls like 1/L (alpha_max <= {t_max.upper:.6g}/L, PROVED for every L)",
                          "criterion: L*alpha_max <= C PROVED for a finite C (the row above)" + rate_text,
                          _refs(t_max), 0, 0.0, cert, None)
    if curve is None or not curve.alpha_max or not (curve.alpha_max[-1] > 0):
        return ProfileRow(spec.key, spec.title, spec.group, "", "UNDECIDED", None, None, None, None, None,
                          "not settled", "no worst-logits curve to pick a constant from" + rate_text, (), 0, 0.0, cert)
    tail = curve.alpha_max[-1]
    c = _decimal_below(tail / 2)
    relation = f"alpha_max <= {c}"
    began = time.perf_counter()
    try:
        rec = run.check(relation, {"a": run.a, "T": run.T}, {"L": [ESCAPE_L, 10**9]})
    except AttnBoundsError as exc:
        return _failed_row(spec, relation, exc, time.perf_counter() - began)
    seconds = time.perf_counter() - began
    ref = (RecordRef("check", rec.id, rec.verdict, rec.content_hash, bool(rec.certified)),)
    cx = rec.counterexample or {}
    forall = [lim for lim in cx.get("limit", []) or [] if str(lim.get("status", "")).startswith("violated")
              and lim.get("L_max") is None and lim.get("L0") is not None]
    if rec.verdict == "REFUTED" and rec.certified and not forall and cx.get("instance") is not None:
        forall = _violated_for_every_L(run, relation, cx)
    base = (f"criterion: alpha_max <= {c} (half the worst-logits float alpha_max {tail:.4g} at L = {curve.L[-1]:.3g}) "
            f"REFUTED by a counterexample certified for every L >= L0 (searched over L in [{ESCAPE_L}, 10^9])")
    if rec.verdict == "REFUTED" and rec.certified and forall:
        best = min(forall, key=lambda lim: lim["L0"])
        finding = f"yes: alpha_max > {c} for every L >= {best['L0']} (certified along '{best['family']}')"
        base += ("; the counterexample's growth analysed against the relation over every L (the record's range of "
                 "L, for the search, ends at 10^9)") if not any(lim.get("L_max") is None
                                                              for lim in cx.get("limit", []) or []) else ""
        return ProfileRow(spec.key, spec.title, spec.group, relation, "REFUTED", float(c), None, c, None, None,
                          finding, _ball_note(run.target) + base + rate_text, ref, 1, seconds, cert, rec.to_json())
    falls = "" if rate is None else ("; float curve flat" if abs(rate) < 1e-3 else f"; float curve ~ L^-{rate:.2g}")
    if rec.verdict == "REFUTED":
        where = f"at L = {cx.get('L')}"
        lims = "; ".join(f"{lim.get('family')}: {lim.get('status')} ({str(lim.get('detail', ''))[:120]})"
                         for lim in cx.get("limit", []) or [])
        how = "certified" if rec.certified else "float64 only"
        finding = (f"not settled: alpha_max > {c} {where} ({how}), not certified for every L{falls}" if cert else
                   f"float only: alpha_max > {c} {where}{falls}")
        return ProfileRow(spec.key, spec.title, spec.group, relation, "UNDECIDED", None, None, None, None, None,
                          finding, f"{_ball_note(run.target)}{base}; the counterexample's growths: "
                          f"{lims or 'none'}{rate_text}", ref, 1, seconds, cert, rec.to_json())
    finding = f"not settled: alpha_max <= {c} is {rec.verdict}{falls}"
    return ProfileRow(spec.key, spec.title, spec.group, relation, "UNDECIDED", None, None, None, None, None, finding,
                      base + f"; the check says {rec.verdict}: {rec.reason[:300]}" + rate_text, ref, 1, seconds, cert,
                      rec.to_json())


def _gradient_row(run: _Runner, spec: RowSpec) -> ProfileRow:
    from attnbounds.theory.mathematics.quantities import QUANTITIES

    q = spec.quantity
    assert q is not None
    cert = run.target.certified
    provable = cert and run.target.relaxed and QUANTITIES[q].has("relaxed")
    began = time.perf_counter()
    first = None
    guess = _float_sup(run.target, q, run.a, run.T)
    start = None if guess is None or guess <= 0 else guess / 2  # REFUTED first: a counterexample, then jumps
    if provable:  # the 1/T scaling: J_x <= C/T over every T
        rel = f"{q} <= C/T"
        try:
            first = run.tighten(rel, {"a": run.a}, start=None if start is None else start * run.T,
                                max_checks=min(run.max_checks, EVERY_T_CHECKS))
        except AttnBoundsError as exc:
            return _failed_row(spec, rel, exc, time.perf_counter() - began)
        if first.proved is not None:
            finding = f"scales like 1/T: {q} <= {first.upper:.6g}/T for every T (PROVED)"
            return _tighten_row(spec, rel, first, cert, finding)
    rel = f"{q} <= C"
    try:
        t = run.tighten(rel, {"a": run.a, "T": run.T}, start=start)
    except AttnBoundsError as exc:
        return _failed_row(spec, rel, exc, time.perf_counter() - began)
    why_fixed = []
    if not cert:
        why_fixed.append("a Python function: float64 only")
    elif not run.target.relaxed:
        why_fixed.append(f"the relaxation prover cannot read {run.target.label} (no log F): no constant can be PROVED, "
                         f"the upper side stays open (VERIFIED at most)")
    elif not QUANTITIES[q].has("relaxed"):
        why_fixed.append(f"{q} has no relaxed form: no constant can be PROVED, the upper side stays open (VERIFIED "
                         f"at most)")
    elif first is not None:
        why_fixed.append(f"the 1/T scaling is not certified ({q} <= C/T over every T: {first.bracket_text()}, "
                         f"{first.reason[:160]}); the bracket is at T = {run.T:g}")
    if t.proved is not None:
        finding = f"{q} <= {t.upper:.6g} at T = {run.T:g} (PROVED)"
    elif t.refuted is not None:
        finding = f"sup {q} > {t.lower:.6g} at T = {run.T:g}" + ("" if t.best_verified is None else
                                                                   f"; VERIFIED only at {float(Fraction(t.best_verified)):.6g}")
    elif t.estimate is not None:
        finding = f"no side certified; float64: {q} reaches {t.estimate:.6g} at T = {run.T:g} (not certified)"
    else:
        finding = "no side settled"
    more = _refs(first) if first is not None else ()
    detail = {"fixed_T": t.to_json(), "every_T": None if first is None else first.to_json()}
    row = _tighten_row(spec, f"{rel} (T = {run.T:g})", t, cert, finding, "; ".join(why_fixed), more, detail)
    return dataclasses.replace(row, checks=row.checks + (0 if first is None else first.checks),
                               seconds=time.perf_counter() - began)


def _float_sup(target: _Target, q: str, a: float, T: float) -> float | None:
    """The largest float64 value of ``q`` on a few structured instances with logits in [-a, a] at T (equal logits, two
    levels, one token apart) for a tighten's first guess; None for a torch function or when none computes."""
    if not target.certified:
        return None
    from attnbounds.theory.mathematics.instance import Instance
    from attnbounds.theory.mathematics.quantities import compute

    n = target.argument
    best = None
    rows = []
    for L in (2, 3, 4, 8, 16, 64):
        rows += [np.zeros(L), np.r_[a, -a * np.ones(L - 1)], np.r_[-a, a * np.ones(L - 1)],
                 np.r_[a * np.ones(L // 2), -a * np.ones(L - L // 2)], np.linspace(-a, a, L)]
    for lg in rows:
        try:
            with np.errstate(all="ignore"):
                v = float(compute(q, Instance.from_logits(lg[None, :], n, T=np.array([T]), a=np.array([a])))[0])
        except Exception:  # noqa: BLE001 - a guess only
            continue
        if math.isfinite(v) and (best is None or v > best):
            best = v
    return best


def curve_of(target: _Target) -> Curve | None:
    Ls = [L for L in CURVE_L if L <= target.curve_max_L]
    if target.curve_max_L not in Ls:
        Ls.append(target.curve_max_L)
    values = []
    try:
        with np.errstate(all="ignore"):
            for L in Ls:
                values.append(target.weights(L))
    except Exception as exc:  # noqa: BLE001 - a curve is an illustration: its failure is said, never fatal
        if not values:
            return Curve((), (), f"not computed: {type(exc).__name__}: {exc}")
        Ls = Ls[:len(values)]
    how = ("one token at +a, the other L - 1 at -a, the normaliser's float form (float64, token classes)"
           if target.certified else "one token at +a, the other L - 1 at -a, the torch function (float64, dense)")
    return Curve(tuple(Ls), tuple(values), how)


def profile(normaliser: Any, *, a: float = DEFAULT_A, T: float = DEFAULT_T, params: Mapping[str, float] | None = None,
            statements: Sequence[str] | str | None = None, rows: Iterable[str] | None = None,
            budget: float = DEFAULT_BUDGET, seed: int = 0, rtol: float = DEFAULT_RTOL,
            max_checks: int = DEFAULT_MAX_CHECKS, progress: bool | Callable[[str], None] = False) -> Profile:
    """The profile of ``normaliser`` (module docstring): a built-in name (``"softmax"``, ``"ssmax"``, ...; its own
    parameters in ``params``, e.g. ``{"s": 0.5}``), the name of a ``[[normaliser]]`` of ``statements`` (a statements
    file or several), a :class:`~attnbounds.theory.mathematics.normalisers.RatioNormaliser`, or a torch function
    ``fn(logits, T) -> weights`` (float only, labelled). ``a`` (> 0) bounds the logits, ``T`` (> 0) is the
    temperature; ``rows`` picks rows by key (:data:`ROW_KEYS`, default all); ``budget`` (seconds per check),
    ``seed``, ``rtol`` and ``max_checks`` are each row's tighten's. Bad input raises
    :class:`~attnbounds.theory.mathematics.errors.InvalidArgument` naming it."""
    from attnbounds.theory.running.tighten import check_arguments, _stderr

    a = _check_number("a", a, positive=True)
    T = _check_number("T", T, positive=True)
    check_arguments(budget, seed, rtol, max_checks, None)
    keys = list(ROW_KEYS if rows is None else rows)
    unknown = [k for k in keys if k not in ROW_KEYS]
    if unknown or not keys:
        raise InvalidArgument(f"profile: unknown rows {unknown or keys!r}; the rows: {', '.join(ROW_KEYS)}")
    if isinstance(statements, (str, Path)):
        statements = [str(statements)]
    began = time.perf_counter()
    target = _target(normaliser, a=a, T=T, params=params, statements=statements)
    say = progress if callable(progress) else (_stderr if progress else None)
    run = _Runner(target, a, T, float(budget), int(seed), float(rtol), int(max_checks), say)
    curve = curve_of(target)
    out: list[ProfileRow] = []
    if any(k.startswith("vanish.") for k in keys):
        out += [r for r in _vanish_rows(run, curve, keys) if r.key in keys]
    if "collapse.mass" in keys:
        out.append(_mass_row(run, next(r for r in ROWS if r.key == "collapse.mass"), curve))
    for spec in ROWS:
        if spec.quantity is not None and spec.key in keys:
            out.append(_gradient_row(run, spec))
    notes = []
    if curve is not None:
        notes.append(f"worst-logits curve: {curve.how}; alpha_max = {curve.alpha_max[-1]:.4g} at L = {curve.L[-1]:.3g}"
                     if curve.alpha_max else curve.how)
    notes.append("Theorem 1 bounds the context vector's distance to the tokens left out through the mass abar_N of "
                 "the selected tokens: its part about the normaliser alone is the top-N mass row; the rest reads token "
                 "vectors. Theorem 2 (separability of embeddings on a sphere) has no row: it is about embeddings, not "
                 "the weights")
    return Profile(target.label, target.description, a, T, dict(target.params), target.certified, float(budget),
                   int(seed), float(rtol), int(max_checks), tuple(out), curve, time.perf_counter() - began,
                   tuple(notes))


# -- comparison ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    """Profiles side by side (:func:`compare`): ``profiles``, and ``missing`` (the default alternatives not in the
    registry, each with the names looked for)."""

    profiles: tuple[Profile, ...]
    missing: tuple[str, ...]
    seconds: float

    def markdown(self) -> str:
        """The profiles side by side (one Markdown table, :func:`attnbounds.theory.io.profiles.table_markdown`)."""
        from attnbounds.theory.io.profiles import table_markdown

        return table_markdown([{k: v for k, v in p.to_json().items() if k != "curve"} for p in self.profiles],
                              self.missing, self.seconds)

    def __str__(self) -> str:
        return self.markdown()

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def _repr_html_(self) -> str:
        return "".join(p.html() for p in self.profiles)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "attnbounds.profile.compare", "seconds": self.seconds, "missing": list(self.missing),
                "table": self.markdown(), "profiles": [p.to_json() for p in self.profiles]}


def default_compare() -> tuple[list[str], list[str]]:
    """``(names to profile, alternatives missing)``: :data:`COMPARE` read against the registry."""
    from attnbounds.theory.mathematics.normalisers import BUILTIN_NAMES

    present, missing = [], []
    for label, names in COMPARE:
        found = next((n for n in names if n in BUILTIN_NAMES), None)
        if found is None:
            missing.append(f"{label} (looked for {', '.join(names)})")
        else:
            present.append(found)
    return present, missing


def compare(normalisers: Iterable[Any] | None = None, **kwargs: Any) -> Comparison:
    """The profiles of ``normalisers`` (default: :func:`default_compare`'s) with the same settings (``kwargs``:
    :func:`profile`'s), side by side."""
    began = time.perf_counter()
    missing: list[str] = []
    if normalisers is None:
        names, missing = default_compare()
        items: list[Any] = list(names)
    else:
        items = list(normalisers)
        if not items:
            raise InvalidArgument("profile --compare: give at least one normaliser")
    profiles = tuple(profile(n, **kwargs) for n in items)
    return Comparison(profiles, tuple(missing), time.perf_counter() - began)


profile.compare = compare  # type: ignore[attr-defined]


# -- the plot -----------------------------------------------------------------------------------------------------
def write_plot(data: Mapping[str, Any], path: str | Path) -> str:
    """The worst-logits curve of a profile's JSON and the certified C/L (the ``vanish.max`` row's PROVED side) as a
    PNG at ``path``; returns what was done, in a line."""
    curve = data.get("curve") or {}
    if not curve.get("L"):
        return f"no plot: {data.get('normaliser')} has no worst-logits curve"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (pip install matplotlib)"
    Ls = np.asarray(curve["L"], dtype=np.float64)
    fig, ax = plt.subplots(figsize=(6.0, 4.0), dpi=110)
    ax.loglog(Ls, np.maximum(np.asarray(curve["alpha_max"], dtype=np.float64), 1e-300), "o-", ms=3,
              label="alpha_max, worst logits (float64)")
    row = next((r for r in data.get("rows", []) if r.get("key") == "vanish.max"), None)
    if row is not None and row.get("upper") is not None and row.get("verdict") == "PROVED":
        ax.loglog(Ls, np.minimum(row["upper"] / Ls, 1.0), "--", label=f"certified bound min(1, {row['upper']:.5g}/L)")
    else:
        why = "no vanish.max row" if row is None else f"L*alpha_max <= C: {row.get('verdict')}, no C PROVED"
        ax.text(0.02, 0.03, f"no certified C/L ({why})", transform=ax.transAxes, fontsize=8)
    ax.set_xlabel("L (tokens)")
    ax.set_ylabel("alpha_max")
    ax.set_title(f"{data.get('normaliser')}: a = {data.get('a'):g}, T = {data.get('T'):g}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(str(path), format="png")
    plt.close(fig)
    return f"plot written to {path}"


def plot_paths(json_path: str | Path, names: Sequence[str]) -> list[Path]:
    """Where the plots of a ``--json`` output go: next to it, one per profile."""
    base = Path(json_path)
    safe = ["".join(c if c.isalnum() or c in "-_" else "_" for c in n) for n in names]
    return [base.with_name(f"{base.stem}.{s}.png") for s in safe]


__all__ = ["profile", "compare", "Profile", "ProfileRow", "Comparison", "Curve", "RecordRef", "ROWS", "ROW_KEYS",
           "COMPARE", "default_compare", "write_plot", "DEFAULT_A", "DEFAULT_T", "DEFAULT_BUDGET"]
