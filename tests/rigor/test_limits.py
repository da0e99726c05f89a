"""The limit analysis (:mod:`attnbounds.theory.deciding.limits`): along a family of token-class instances growing with
L, a certified "violated for every L >= L0" never starts below where the statement is actually false, a true
statement is never certified violated along a family, and the analysis is bounded by work, not by the clock
(the same result in any thread, on any machine)."""

from __future__ import annotations

import threading

import numpy as np

import pytest
import sympy as sp

from attnbounds.theory.deciding import limits
from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax
from attnbounds.theory.mathematics.statement import Citation, Statement
from attnbounds.theory.mathematics.statements._symbols import L, alpha_max, alpha_min, dF_l2
from tests.planted import weights_lower, weights_upper


def _one_vs_rest(top: float, rest: float, L: int, a: float) -> Instance:
    return Instance.from_logits([[top, rest]], softmax(1.0), counts=[[1, L - 1]], a=a, T=1.0)


@pytest.mark.parametrize("planted, top, rest", [(weights_lower(0.05, 3.0), -3.0, 3.0),
                                                (weights_upper(0.05, 1.0), 1.0, -1.0)])
def test_violated_for_every_L_from_L0_and_never_below_the_threshold(planted, top, rest) -> None:
    """One token at one end of F, the rest at the other: false exactly from ``planted.threshold`` tokens on."""
    start = planted.threshold + 5
    inst = _one_vs_rest(top, rest, start, 3.0 if top == -3.0 else 1.0)
    assert certify(planted.statement, inst).status == "violated"
    results = limits.analyse(planted.statement, inst, violated=True)
    grows = [r for r in results if r.status.startswith("violated")]
    assert grows, [r.to_json() for r in results]
    for r in grows:
        assert r.L0 is not None and planted.threshold <= r.L0 <= start, r.to_json()
        growth = next(g for g in limits.growths(inst) if g.name == r.growth)
        for L in (r.L0, r.L0 + 1, 10**6, 10**9):  # spot checks of the certificate at full length
            if r.L_max is not None and L > r.L_max:
                continue
            t = (L - growth.length(0)) // sum(growth.growth)
            if t < 0 or growth.length(t) != L:
                continue
            assert certify(planted.statement, growth.at(t)).status == "violated", (r.growth, L)


@pytest.mark.parametrize("planted, top, rest, a", [(weights_lower(0.0, 3.0), -3.0, 3.0, 3.0),
                                                   (weights_upper(0.0, 3.0), 3.0, -3.0, 3.0)])
def test_a_true_statement_tight_as_L_grows_is_never_violated_along_a_family(planted, top, rest, a) -> None:
    inst = _one_vs_rest(top, rest, 50, a)
    for r in limits.analyse(planted.statement, inst, violated=False):
        assert not r.status.startswith("violated"), r.to_json()


def test_the_analysis_is_bounded_by_work_and_the_same_in_any_thread() -> None:
    planted = weights_lower(0.05, 3.0)
    inst = _one_vs_rest(-3.0, 3.0, planted.threshold + 5, 3.0)
    starved = limits.analyse(planted.statement, inst, violated=True, work_limit=5)
    assert all(r.status == "unsupported" and "WorkLimit" in r.detail for r in starved), [r.to_json() for r in starved]
    here = [r.to_json() for r in limits.analyse(planted.statement, inst, violated=True)]
    there: list = []
    worker = threading.Thread(target=lambda: there.extend(
        r.to_json() for r in limits.analyse(planted.statement, inst, violated=True)))
    worker.start()
    worker.join()
    assert here == there


def test_a_bound_on_the_norm_of_F_prime_is_certified_along_growths_and_holds_at_their_members() -> None:
    """``||F'||_2 / sum_k F(l_k)`` (``dF_l2``) reads the counts only through the classes' sizes, so the analysis
    gives its closed form along each growth: ``dF_l2 <= 1/2``, false at the base instance, is certified to hold from
    some ``L0`` on, and certify agrees at members of the growth from ``L0``."""
    statement = Statement("limits.dF_l2-half", "||F'||_2 / sum_k F(l_k) <= 1/2", sp.Le(dF_l2, sp.Rational(1, 2)),
                          Citation("test"), (hyp.F_POSITIVE, hyp.F_LENGTH_INDEPENDENT, hyp.LOGITS_BOUNDED, hyp.SOFTMAX),
                          bindings={"dF_l2": "dF_l2"}, fixed={"a": 3.0, "T": 1.0})
    inst = Instance.from_logits([[2.0, -1.0]], softmax(1.0), counts=[[1, 9]], a=3.0, T=1.0)
    assert certify(statement, inst).status == "violated"
    results = limits.analyse(statement, inst, violated=False)
    assert results and all(r.status == "holds-for-all" for r in results), [r.to_json() for r in results]
    for r in results:
        growth = next(g for g in limits.growths(inst) if g.name == r.growth)
        step = sum(growth.growth)
        first = -(-(r.L0 - growth.length(0)) // step)  # the first member with L >= L0
        for value in (first, first + 1, 10**6):
            assert certify(statement, growth.at(value)).status == "holds", (r.growth, growth.length(value))


@pytest.mark.parametrize("name", sorted(n for n, q in __import__(
    "attnbounds.theory.mathematics.quantities", fromlist=["QUANTITIES"]).QUANTITIES.items() if q.closed_form))
def test_every_quantity_its_specification_marks_closed_form_is_analysed_along_growths(name: str) -> None:
    """A quantity whose specification says ``closed_form`` (its ball form reads the counts only through ``ex.m``,
    ``ex.length``, ``ex.size_N``) takes part in the limit analysis: a loose bound on it is certified to hold along
    at least one growth of a token-class instance that has every input a quantity reads (x, q and k, a, the heads'
    p, a direction v), or its closed form is built and only sympy finds no limit of it (the mean Jacobian bounds);
    the analysis never answers 'no closed form' for it, nor fails to build one."""
    results = limits.analyse(_loose_bound(name), _every_input(), violated=False)
    built = [r.status.startswith("holds") or r.detail == "sympy found no limit of the margin" for r in results]
    assert results and all(built), [(r.status, r.detail) for r in results]


@pytest.mark.parametrize("name", sorted(n for n, q in __import__(
    "attnbounds.theory.mathematics.quantities", fromlist=["QUANTITIES"]).QUANTITIES.items() if not q.closed_form))
def test_a_quantity_without_a_closed_form_is_never_analysed_along_growths(name: str) -> None:
    """The others (a secular equation, an expectation over sphere draws, a minimum over pairs): their ball forms give
    a value at one instance, not a function of L along a growth, so the analysis answers 'unsupported' and names the
    quantity; it never certifies a loose bound on them along a growth, nor a violation."""
    results = limits.analyse(_loose_bound(name), _every_input(), violated=False)
    assert [(r.status, r.detail) for r in results] == [
        ("unsupported", f"no closed form along token classes for {name}")], results


def _every_input() -> Instance:
    """A token-class instance (counts 2, 3, 4) with every input a quantity reads: x, q and k, a, the heads' p, a
    direction v, the sphere's M, delta, r."""
    import numpy as np

    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((1, 4)), rng.standard_normal((1, 3, 4))
    return Instance.from_logits(np.einsum("bd,bkd->bk", q, k), softmax(1.0), counts=[[2, 3, 4]], N=3, q=q, k=k,
                                x=rng.standard_normal((1, 3, 4)), M=3.0, delta=0.1, r=1.0, a=3.0, p=0.5, H=2, eps=0.1,
                                arrays={"v": np.array([[0.6, 0.8, 0.0]])})


def _loose_bound(name: str) -> Statement:
    """``name <= 10^6`` in the form its shape takes (a sum over the selection, a maximum over tokens, a value)."""
    from attnbounds.theory.mathematics.quantities import QUANTITIES
    from attnbounds.theory.running import api

    shape = QUANTITIES[name].shape
    relation = {"BN": f"Sum({name}[i], (i, 1, N)) <= 10**6*N", "BL": f"Max({name}) <= 10**6"}.get(shape,
                                                                                             f"{name} <= 10**6")
    return api.statement(relation, hypotheses=["softmax"], id="closed-form").statements[0]


def test_the_symbolic_tier_reads_float_ends_of_constants_and_refuses_those_of_expressions_in_L() -> None:
    """A constant along a growth (held as a symbol, its value an arb ball) has float ends, the arb ball's; a value
    that depends on ``t`` has none (Unsupported). Ops' generic ends compared a double with the symbol in Python, a
    sympy Relational, and every limit analysis that asked (self-adjusting softmax's largest logit) ended in
    'TypeError: cannot determine truth value of Relational'."""
    from attnbounds.theory.mathematics.intervals import Unsupported, backend
    from attnbounds.theory.mathematics.symbolic import SymbolicOps, Work, t

    ops, arb = SymbolicOps(Work(10_000)), backend("arb")
    with ops.precision(128), arb.precision(128):
        c = ops.const(arb.num(1) / arb.num(3))
        assert (ops.lower_float(c), ops.upper_float(c)) == (arb.lower_float(c_ball := arb.num(1) / arb.num(3)),
                                                            arb.upper_float(c_ball))
        assert ops.lower_float(c) <= 1 / 3 <= ops.upper_float(c)
        with pytest.raises(Unsupported):
            ops.upper_float(c + t)


def test_the_symbolic_tier_knows_which_values_depend_on_L_and_folds_a_long_maximum_once() -> None:
    """``depends_on_t`` is ``t in free_symbols``, remembered per subexpression; a maximum over 1000 columns, each a
    value in t or a constant, is their maximum at every t. The fold once asked ``free_symbols`` of the whole nest
    at every step: quadratic, and the limit analysis of ``abar_N <= N alpha_max`` at a 906-token instance ran 424 s
    of a 10 s budget (4 s now)."""
    from attnbounds.theory.mathematics.intervals import backend
    from attnbounds.theory.mathematics.opaque import OMax
    from attnbounds.theory.mathematics.symbolic import SymbolicOps, Work, t

    ops, arb = SymbolicOps(Work(100_000)), backend("arb")
    c = sp.Symbol("_c", real=True)
    for expr in (t, c, sp.exp(-t) + c, OMax(OMax(c, 2 * c), sp.log(1 + t)), sp.Integer(3), OMax(c, c + 1)):
        assert ops.depends_on_t(expr) == (t in expr.free_symbols), expr
    with ops.precision(64), arb.precision(64):
        for n in (200, 1000):
            values = [sp.Rational(k, n) * t if k % 2 else ops.const(arb.num(k) / arb.num(3 * n)) for k in range(n)]
            folded = ops.maximum(np.array(values, dtype=object))
            assert ops.depends_on_t(folded)
        consts = {s: float(ball.mid()) for s, ball in ops.consts.items()}
        for point in (0.1, 0.25, 1.0):  # the largest of (k/n) t (k odd) and k/(3n) (k even), n = 1000
            want = max((n - 1) / n * point, (n - 2) / (3 * n))
            got = _evaluate(folded, {t: point, **consts})
            assert abs(got - want) < 1e-12, (point, got, want)


def _evaluate(expr: sp.Basic, at: dict) -> float:
    """A nest of OMax, sums and products at a point, without recursion (the nest is 1000 deep)."""
    from attnbounds.theory.mathematics.opaque import OMax

    done: dict = {}
    stack = [expr]
    while stack:
        e = stack[-1]
        todo = [a for a in e.args if a not in done]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        args = [done[a] for a in e.args]
        done[e] = (at[e] if e in at else float(e) if e.is_Number else max(args) if isinstance(e, OMax)
                   else sum(args) if e.is_Add else float(np.prod(args)) if e.is_Mul else float("nan"))
    return done[expr]


def test_the_sign_along_a_growth_is_one_of_minus_one_zero_and_one() -> None:
    """``_sweep`` answers the sign itself (-1, 0 undecided, +1), how far from u = 0 it is certified (exactly: a dyadic
    rational) and whether it reaches the limit u = 0: a margin of the other sign further from u = 0 is cut off where
    the sign changes (the sweep goes from u = 0 up), a sign change below every piece leaves only the limit open."""
    from fractions import Fraction

    ops = limits.SymbolicOps(limits.Work(limits.WORK_LIMIT))
    u = limits.u
    with ops.precision(128):
        assert limits._sweep(-1 - u, ops) == (-1, Fraction(1), True)
        assert limits._sweep(2 + u**2, ops) == (1, Fraction(1), True)
        for root in (sp.Rational(1, 4), sp.Rational(1, 3), sp.Rational(1, 1000)):  # negative below, positive above
            sign, u0, to_zero = limits._sweep(u - root, ops)  # bisected to within 1e-12 of the root, never beyond
            assert sign == -1 and to_zero and Fraction(str(root)) * (1 - Fraction(1, 10**11)) <= u0 < Fraction(str(root))
        assert limits._sweep(u - sp.Rational(1, 2**90), ops) == (1, Fraction(1), False)  # a root below every piece
        assert limits._sweep(sp.Integer(0) * u, ops) == (0, Fraction(0), False)  # no sign anywhere


def test_the_growths_of_an_instance_grow_its_largest_class_and_every_class_in_proportion() -> None:
    """Counts 1, 2, 4 (N = 3 selecting the first two columns): the largest class grows alone (the selection keeps N),
    and every class grows by its count over their gcd, 1: (1, 2, 4), one-token classes included, with N growing by
    the selected classes' steps (1 + 2 per step)."""
    inst = Instance.from_logits([[2.0, 1.0, -1.0]], softmax(1.0), counts=[[1, 2, 4]], N=3,
                                selection=[[True, True, False]])
    largest, proportional = limits.growths(inst)
    assert largest.growth == (0, 0, 1) and largest.selected_growth() == 0
    assert proportional.growth == (1, 2, 4) and proportional.selected_growth() == 3
    member = proportional.at(2)
    assert member.N == 9 and list(member.counts[0]) == [3, 6, 12] and member.L == proportional.length(2) == 21
    plain = limits.growths(Instance.from_logits([[2.0, 1.0, -1.0]], softmax(1.0), counts=[[1, 2, 4]]))
    assert [g.selected_growth() for g in plain] == [0, 0] and plain[1].at(1).N is None


def test_a_conjunct_that_fails_as_L_grows_is_never_certified_to_hold_along_the_growth() -> None:
    """``alpha_min <= 0.9 & L <= 50`` holds at the base (L = 10), its first conjunct with the smaller margin there;
    the second fails from L = 51. The statement holds along a growth only where every conjunct does (each distinct
    margin certified, not only the smallest at the base, which once certified 'holds up to L = 1e15' here): the
    analysis says violated, from an L where certify agrees."""
    statement = Statement("limits.two-conjuncts", "alpha_min <= 0.9 and L <= 50",
                          sp.And(sp.Le(alpha_min, sp.Rational(9, 10)), sp.Le(L, 50)), Citation("test"),
                          (hyp.F_POSITIVE, hyp.SOFTMAX), bindings={"alpha_min": "alpha_min"}, fixed={"T": 1.0})
    inst = Instance.from_logits([[1.0, 0.0]], softmax(1.0), counts=[[1, 9]], T=1.0)
    assert certify(statement, inst).status == "holds"
    results = limits.analyse(statement, inst, violated=False)
    assert results and not any(r.status.startswith("holds") for r in results), [r.to_json() for r in results]
    for r in results:
        assert r.status.startswith("violated") and r.L0 is not None and r.L0 > 50, r.to_json()
        assert "the margin of L <= 50 is certified < 0" in r.detail, r.detail
        growth = next(g for g in limits.growths(inst) if g.name == r.growth)
        member = -(-(r.L0 - growth.length(0)) // sum(growth.growth))
        assert certify(statement, growth.at(member)).status == "violated"


def _L_alpha_max(hypotheses: tuple = (hyp.SOFTMAX,), **kwargs) -> Statement:
    return Statement("limits.L-alpha-max", "L*alpha_max <= 2", sp.Le(L * alpha_max, 2), Citation("test"), hypotheses,
                     bindings={"alpha_max": "alpha_max"}, **kwargs)


@pytest.mark.parametrize("high, expected", [(50, ("violated-up-to", 10, 50)), (12, ("violated-up-to", 10, 12)),
                                            (10, ("violated-up-to", 10, 10)),  # the range ends at the instance
                                            (None, ("violated-up-to", 10, "past 10^15"))])
def test_a_violation_along_a_growth_stops_at_the_upper_end_of_the_statements_range_of_L(high, expected) -> None:
    """``L*alpha_max <= 2`` for softmax is false at logits (3, 0), counts (1, 9), and along both growths (the limit is
    e^3 and 3.9); with a range of L the members beyond its end fail the hypothesis 'parameter-ranges' (NOT-APPLICABLE,
    not counterexamples), so the violation is certified up to that end and no further (without a range, past 10^15:
    the limit itself is sympy's)."""
    ranges = {"L": (2, high)} if high is not None else {}
    statement = _L_alpha_max(fixed={"T": 1.0}, ranges=ranges)
    inst = Instance.from_logits([[3.0, 0.0]], softmax(1.0), counts=[[1, 9]], T=1.0)
    assert certify(statement, inst).status == "violated"
    results = limits.analyse(statement, inst, violated=True)
    got = [(r.status, r.L0, "past 10^15" if r.L_max is not None and r.L_max > 10**15 else r.L_max) for r in results]
    assert got == [expected, expected], [r.to_json() for r in results]


def test_a_violation_certified_only_beyond_the_range_of_L_is_not_claimed() -> None:
    """Softmax ``L*alpha_max <= 2.5`` at logits (1, 0), counts (1, 2): along the growth of the class of 2 (logit 0),
    L alpha_max = L e / (e + L - 1) passes 2.5 between L = 19 and 20 (the limit is e): with a range of L up to 12 no
    member of the range is a counterexample, and the analysis says so instead of claiming a violation (certified
    from L = 102 on)."""
    statement = Statement("limits.beyond", "L*alpha_max <= 5/2", sp.Le(L * alpha_max, sp.Rational(5, 2)),
                          Citation("test"), (hyp.SOFTMAX,), bindings={"alpha_max": "alpha_max"}, fixed={"T": 1.0},
                          ranges={"L": (2, 12)})
    inst = Instance.from_logits([[1.0, 0.0]], softmax(1.0), counts=[[1, 2]], T=1.0)
    results = limits.analyse(statement, inst, violated=False, work_limit=10**7)  # a sign change costs the default's
    assert results and not any(r.status.startswith("violated") for r in results), [r.to_json() for r in results]
    assert any("beyond the statement's range of L (up to 12)" in r.detail for r in results), \
        [r.to_json() for r in results]


@pytest.mark.parametrize("case", ["unit-direction", "weights without a normaliser", "weights and no hypothesis",
                                  "a hypothesis of the user's"])
@pytest.mark.parametrize("violated", [True, False])  # a counterexample's analysis, and a tight instance's
def test_no_violation_is_claimed_along_a_growth_where_a_hypothesis_may_fail(case: str, violated: bool) -> None:
    """A violation along a growth is claimed only when every hypothesis holds at every member: the unit direction v
    (its norm grows with the counts), the simplex for weights given without a normaliser (they keep their values, so
    their weighted sum grows past 1; without any hypothesis the members are not instances at all), and a hypothesis
    that does not say (a user's, ``along_growths`` None)."""
    if case == "unit-direction":
        statement = _L_alpha_max((hyp.SOFTMAX, hyp.UNIT_DIRECTION), fixed={"T": 1.0})
        inst = Instance.from_logits([[3.0, 0.0]], softmax(1.0), counts=[[1, 9]], T=1.0,
                                    arrays={"v": [[0.6, 0.8 / 3]]})
    elif case.startswith("weights"):
        statement = _L_alpha_max((hyp.SIMPLEX,) if case == "weights without a normaliser" else ())
        inst = Instance.from_weights([[0.55, 0.05]], counts=[[1, 9]])
    else:
        mine = hyp.Hypothesis("mine", "a user's hypothesis", lambda inst: np.ones(inst.B, dtype=bool))
        statement = _L_alpha_max((hyp.SOFTMAX, mine), fixed={"T": 1.0})
        inst = Instance.from_logits([[3.0, 0.0]], softmax(1.0), counts=[[1, 9]], T=1.0)
    assert bool(statement.check_hypotheses(inst)[0][0])
    assert certify(statement, inst).status in ("violated", "inconclusive")
    results = limits.analyse(statement, inst, violated=violated)
    why = "weights were given without a normaliser" if case.startswith("weights") else "is not known to hold along it"
    assert results and not any(r.status.startswith("violated") for r in results), [r.to_json() for r in results]
    if violated or not case.startswith("weights"):  # (fixed weights: L alpha_max grows like L, no limit to analyse)
        assert all(r.status == "unsupported" and why in r.detail for r in results), [r.to_json() for r in results]


def test_every_hypothesis_said_to_hold_along_growths_holds_at_their_members() -> None:
    """Each hypothesis of the catalogue whose ``along_growths`` says it holds along the growths of an instance (one
    that satisfies it) is checked at members t = 1, 2, 7 of both growths, on softmax, a length-dependent F, weights
    given directly, with and without a top-N selection, x, q and k, a, the heads' p and a direction v."""
    from attnbounds.theory.io.userbounds import hypothesis_catalogue
    from attnbounds.theory.mathematics.normalisers import scalable_softmax

    base = _every_input()
    instances = [base, Instance.from_logits([[2.0, 0.5, -1.0]], scalable_softmax(0.5, 1.0), counts=[[1, 2, 3]], N=1,
                                            a=2.0, T=1.0),
                 Instance.from_weights([[0.4, 0.1, 0.1]], counts=[[1, 2, 4]], N=1),
                 Instance.from_logits([[0.0, 0.0]], softmax(2.0), counts=[[3, 1]], T=2.0, a=0.5),
                 Instance.from_logits([[1.0, -1.0]], softmax(1.0), counts=[[1, 1]], T=1.0, eps=0.1,
                                      arrays={"v": [[0.6, 0.8]]})]  # a unit direction, one token per class
    def holds(h: hyp.Hypothesis, inst: Instance) -> bool:
        try:
            return bool(h(inst)[0])
        except Exception:  # an instance without what the check reads (logits, a parameter): not one of its instances
            return False

    checked = 0
    for h in hypothesis_catalogue().values():
        for inst in instances:
            if h.along_growths is None or not holds(h, inst) or not h.along_growths(inst):
                continue
            for growth in limits.growths(inst):
                for value in (1, 2, 7):
                    assert holds(h, growth.at(value)), (h.id, growth.name, value)
                    checked += 1
    assert checked > 100, checked


def test_a_single_token_grows_into_copies_of_itself() -> None:
    """A dense instance of one token (L = 1) has one growth, L copies of that token (its two growths agree): softmax
    ``L*alpha_max <= 1/2`` is false there (L alpha_max = 1 at every L), and certified so for every L >= 1."""
    from attnbounds.theory.running import api

    statement = api.statement("L*alpha_max <= 1/2", hypotheses=["softmax"], id="one-token").statements[0]
    inst = Instance.from_logits([[0.3]], softmax(1.0), T=1.0)
    assert [g.growth for g in limits.growths(inst)] == [(1,)]
    results = limits.analyse(statement, inst, violated=True)
    assert [(r.status, r.L0, r.L_max) for r in results] == [("violated-for-all", 1, None)], results


def test_the_statement_holds_for_every_L_of_a_growth_only_where_every_margin_reaches_the_limit() -> None:
    """``dF_l2 <= 1/2`` at logits (2, -1), counts (1, 9) is certified to hold from some L0 to the limit itself (the
    test above); with the conjunct ``L <= 10^30``, which holds on every range the analysis certifies (L up to about
    10^18 from there) but not in the limit, the statement holds from L0 up to a length, never 'for every L'."""
    alone = Statement("limits.dF_l2-half", "||F'||_2 / sum_k F(l_k) <= 1/2", sp.Le(dF_l2, sp.Rational(1, 2)),
                      Citation("test"), (hyp.F_POSITIVE, hyp.F_LENGTH_INDEPENDENT, hyp.LOGITS_BOUNDED, hyp.SOFTMAX),
                      bindings={"dF_l2": "dF_l2"}, fixed={"a": 3.0, "T": 1.0})
    both = Statement("limits.limit-of-each", "dF_l2 <= 1/2 and L <= 10^30",
                     sp.And(alone.relation, sp.Le(L, sp.Integer(10)**30)), Citation("test"), alone.hypotheses,
                     bindings={"dF_l2": "dF_l2"}, fixed={"a": 3.0, "T": 1.0})
    inst = Instance.from_logits([[2.0, -1.0]], softmax(1.0), counts=[[1, 9]], a=3.0, T=1.0)
    first = limits.analyse(alone, inst, violated=False)
    assert first and all(r.status == "holds-for-all" for r in first), [r.to_json() for r in first]
    for r, s_ in zip(limits.analyse(both, inst, violated=False), first):
        assert r.status == "holds-up-to" and r.L0 == s_.L0 and r.L_max is not None and 10**15 < r.L_max < 10**30, \
            r.to_json()


def test_a_margin_that_is_0_at_every_member_is_said_to_tend_to_0_not_to_stay_positive() -> None:
    """Softmax ``alpha_i <= 1/L`` at one token: L copies of it have weights exactly 1/L, the margin is 0 at every L
    (no sign to certify), and the analysis says the margin tends to 0, not that it stays positive."""
    from attnbounds.theory.running import api

    statement = api.statement("alpha_i <= 1/L", hypotheses=["softmax"], id="equal").statements[0]
    results = limits.analyse(statement, Instance.from_logits([[0.5]], softmax(1.0), T=1.0), violated=False)
    assert [(r.status, r.detail) for r in results] == [
        ("limit-only", "sympy's limit says the margin tends to 0 (not certified)")], [r.to_json() for r in results]


@pytest.mark.parametrize("low, high", [(3, 6), (20, 40), (200, 400), (2000, 10**6)])
def test_a_violation_that_returns_for_good_is_claimed_from_just_beyond_its_last_crossing(low: int, high: int) -> None:
    """``L alpha_max >= 1 + (L - low)(L - high) / (L^2 + 10^4)`` at equal logits (L alpha_max = 1): false below
    ``low`` and above ``high``, true between. Along either growth of the two-token base the violation is claimed from
    beyond ``high`` (never inside the band where the statement holds) and within a factor 2 of it (the sweep's pieces
    are a factor 2 apart in t, and the piece at the crossing is bisected); every claimed L checked at full length."""
    from attnbounds.theory.running import api

    st = api.statement(f"L*alpha_max >= 1 + (L - {low})*(L - {high})/(L**2 + 10000)", hypotheses=["softmax"])
    statement = st.statements[0]
    inst = Instance.from_logits([[0.0, 0.0]], softmax(1.0), counts=[[1, 1]], T=1.0)
    results = limits.analyse(statement, inst, violated=True)
    assert len(results) == 2 and all(r.status.startswith("violated") for r in results), [r.to_json() for r in results]
    for r in results:
        assert high < r.L0 <= 2 * (high + 1), r.to_json()
        growth = next(g for g in limits.growths(inst) if g.name == r.growth)
        t0 = next(t for t in range(10 * high) if growth.length(t) == r.L0)
        for t in (t0, t0 + 1, 10 * t0):
            assert certify(statement, growth.at(t)).status == "violated", (r.growth, t)
        inside = next(t for t in range(high) if low < growth.length(t) < high)
        assert certify(statement, growth.at(inside)).status == "holds"  # the band the claim must stay beyond


def test_a_leading_constant_below_the_constants_precision_is_not_estimated() -> None:
    """A constant known to 1e-30 (a ball of that radius about sqrt(2)) less sqrt(2), plus 1e-35: along ``t`` the
    difference is below what the constants show, and the order estimate says it cannot size it (no "stays negative"
    or "positive" read from their last digits); plus 1e-20 instead it is sized (the ends move it by 1e-10 of itself),
    as a plain ``sqrt(2) + 1/t`` is."""
    from attnbounds.theory.deciding.limits import _order
    from attnbounds.theory.mathematics.symbolic import SymbolicOps, Work, t

    ops = SymbolicOps(Work(limits.WORK_LIMIT))
    with ops.precision(128):
        arb = ops.arb
        root = arb.sqrt(arb.num(2))
        wide = ops.const(arb.hull(root - arb.num(1e-30), root + arb.num(1e-30)))
        a = ops.const(root)
        for tiny in (sp.Rational(1, 10**35), -sp.Rational(1, 10**35)):
            assert _order((wide - a + tiny) * (1 + 1 / t), ops) == (0, None)
        p, c = _order((wide - a + sp.Rational(1, 10**20)) * (1 + 1 / t), ops)  # type: ignore[misc]
        assert p == 0 and c is not None and abs(float(c) - 1e-20) <= 1e-26
        p, c = _order(a + 1 / t, ops)  # type: ignore[misc]
        assert p == 0 and abs(float(c) - 2**0.5) <= 1e-12
        p, c = _order(a / t**2 - 1 / t**3, ops)  # type: ignore[misc]  # vanishing as L^-2: sized as well
        assert p == 2 and abs(float(c) - 2**0.5) <= 1e-6


@pytest.mark.parametrize("work", [50, 200, 1000, 5000])
def test_a_sweep_cut_short_by_its_work_keeps_only_what_it_certified(work: int) -> None:
    """``u - 1/3`` (negative below 1/3) with little work: the sweep answers what it certified before the work ran
    out, never beyond the root, and never raises; the tail is then not claimed."""
    from fractions import Fraction

    ops = limits.SymbolicOps(limits.Work(work))
    with ops.precision(128):
        sign, u0, to_zero = limits._sweep(limits.u - sp.Rational(1, 3), ops, ops.work)
    assert (sign, u0, to_zero) == (0, Fraction(0), False) or (sign == -1 and 0 < u0 < Fraction(1, 3))
    if sign and u0 < Fraction(1, 4):
        assert not to_zero


def test_no_claim_is_made_along_the_growths_of_an_instance_outside_the_hypotheses() -> None:
    """Self-adjusting softmax's weights sum to less than 1: an instance of it is outside 'weights on the simplex'
    (certified), and so is every member of its growths; the analysis claims nothing along them, where the same
    logits under softmax (inside) get their claims."""
    from attnbounds.theory.mathematics.normalisers import make
    from attnbounds.theory.running import api

    statement = api.statement("L*alpha_max <= 1/2", hypotheses=["simplex"]).statements[0]
    outside = Instance.from_logits([[1.0, -1.0]], make("sa_softmax", T=1.0), counts=[[1, 3]], T=1.0)
    inside = Instance.from_logits([[1.0, -1.0]], softmax(1.0), counts=[[1, 3]], T=1.0)
    assert certify(statement, outside).status == "not-applicable"
    assert certify(statement, inside).status == "violated"
    results = limits.analyse(statement, outside, violated=False)
    assert results and all(r.status == "unsupported" and "outside the hypotheses" in r.detail for r in results)
    assert any(r.status.startswith("violated") for r in limits.analyse(statement, inside, violated=True))


def test_a_column_without_tokens_has_no_margin_along_the_growths() -> None:
    """A column of count 0 stands for no token: its weight (logit 5 against three tokens at 0: 0.98) says nothing
    about the statement. ``alpha_i <= 1/2`` holds at every token of every member (1/L each), and the analysis says
    so, with no margin of the empty column in it."""
    from attnbounds.theory.running import api

    statement = api.statement("alpha_i <= 1/2", hypotheses=["softmax"]).statements[0]
    inst = Instance.from_logits([[0.0, 5.0]], softmax(1.0), counts=[[3, 0]], T=1.0)
    assert certify(statement, inst).status == "holds"
    results = limits.analyse(statement, inst, violated=False)
    assert results and all(r.status == "holds-for-all" and r.L0 == 3 for r in results), [r.to_json() for r in results]
    growth = limits.growths(inst)[0]
    ops = limits.SymbolicOps(limits.Work(limits.WORK_LIMIT))
    with ops.precision(128):
        assert [m.column for m in limits.margins(statement, growth, ops)] == [0]


def test_the_relative_slack_is_the_margins_leading_coefficient_over_the_bounds() -> None:
    """``alpha_max <= 2/L`` at one logit 1 and the rest 0: along the rest's growth alpha_max ~ e/L, so the margin is
    ``(2 - e)/L`` to leading order and the bound's ``2/L``: the relative slack is ``(2 - e)/2`` (the orders agree);
    against ``1/2`` (order 0) the margin's order 0 coefficient over it."""
    def statement(rhs: sp.Expr) -> Statement:
        return Statement("limits.slack", f"alpha_max <= {rhs}", sp.Le(alpha_max, rhs), Citation("test"),
                         (hyp.SOFTMAX,), bindings={"alpha_max": "alpha_max"})

    inst = Instance.from_logits([[1.0, 0.0]], softmax(1.0), counts=[[1, 40]], T=1.0)
    grown = next(r for r in limits.analyse(statement(2 / L), inst, violated=True) if "column 1" in r.growth)
    assert grown.order == 1 and grown.slack == pytest.approx((2 - np.e) / 2, rel=1e-9), grown.to_json()
    half = next(r for r in limits.analyse(statement(sp.Rational(1, 2)), inst, violated=False) if "column 1" in r.growth)
    assert half.order == 0 and half.slack == pytest.approx(1.0, rel=1e-9), half.to_json()


def test_a_violation_certified_short_of_the_ranges_end_is_not_stretched_to_it() -> None:
    """With a range of L that ends beyond where the sweep certifies the violation (10^30 here), the certificate stops
    where the sweep does, as without a range: the range's end caps a claim, it never extends one."""
    inst = Instance.from_logits([[3.0, 0.0]], softmax(1.0), counts=[[1, 9]], T=1.0)
    free = limits.analyse(_L_alpha_max(fixed={"T": 1.0}), inst, violated=True)
    capped = limits.analyse(_L_alpha_max(fixed={"T": 1.0}, ranges={"L": (2, 10**30)}), inst, violated=True)
    assert [(r.status, r.L0, r.L_max) for r in capped] == [(r.status, r.L0, r.L_max) for r in free]
    assert all(r.L_max is not None and r.L_max < 10**30 for r in capped), [r.to_json() for r in capped]
