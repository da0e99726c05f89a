"""The refusal paths of the proof replay (issue 35): what keeps a forged PROVED certificate from being accepted.

Real proof trees of small problems (a second-order equality, a constrained box, an exact point at a corner reached by
projections, a strict bound closed through the limit t = 0) and a real certificate of a statement are tampered one
token or field at a time, each in a way the replay must see (a coordinate, form or constraint the problem lacks, a
split outside its box, a projection the rule does not allow, an exact point that is not one or does not hold, an
entry too few or too many, a certificate of the wrong shape or hash): the replay refuses, saying why, while the
untampered tree replays. And a property: no single-token tampering of a real proof proves a false twin of its
problem (the same box, the bound strict at its equality or lowered below it).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import zlib
from typing import Any, Callable

import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnbounds.theory.deciding import prover
from attnbounds.theory.deciding.prover import bnb
from attnbounds.theory.deciding.prover.problem import Coordinate, Problem
from attnbounds.theory.mathematics.errors import AttnBoundsError, InvalidArgument
from attnbounds.theory.running import api

x, y = sp.symbols("x y", real=True)
HALF, THIRD = sp.Rational(1, 2), sp.Rational(1, 3)
#: an exact 0 a float enclosure cannot tell from 0: only the exact decision at the point sees the corner's value
ZERO_IN_DISGUISE = (1 + sp.sqrt(2)) ** 2 - 3 - 2 * sp.sqrt(2)
BSIG = {"name": "bsig", "log_F": "log(2 + sigmoid(l/T))"}
#: what the certificate replay turns a malformed tree into (a refusal, never a traceback)
MALFORMED = (ValueError, TypeError, IndexError, KeyError, ArithmeticError, RecursionError, AttnBoundsError)


def _problem(core: sp.Expr, box: tuple[tuple[float, float], tuple[float, float]] = ((0.0, 1.0), (0.0, 1.0)),
             strict: bool = False, constraints: tuple[sp.Expr, ...] = (), x_kind: str = "parameter") -> Problem:
    coordinates = [Coordinate(x, *box[0], x_kind, "x"), Coordinate(y, *box[1], "parameter", "y")]
    return Problem("refusals", 0, "test", coordinates, core, list(constraints), strict, core, [], {}, 0, 0, {}, "test",
                   [])


def _bowl(u: sp.Expr) -> sp.Expr:
    return sp.exp(u) - 1 - u


#: true problems whose proofs hold every kind of entry between them, each with false twins (same box and entries)
TRUE = {
    # 0 at the critical point (1/2, 1/3): splits, projections, natural and mean-value closures, second order
    "second-order": _problem(_bowl(x - HALF) + 2 * _bowl(y - THIRD) + (x - HALF) * (y - THIRD) / 2,
                             ((-1.0, 1.0), (-1.0, 1.0))),
    # 0 on x's upper end, at (1/2, 1/3): a small tree with a second-order closure
    "edge": _problem(_bowl(x - HALF) + _bowl(y - THIRD), ((-0.5, 0.5), (-0.5, 0.5))),
    # boxes outside x + y >= 3/2 closed as infeasible
    "constrained": _problem((x - HALF) ** 2 + (y - HALF) ** 2 - sp.Rational(1, 100),
                            constraints=(x + y - sp.Rational(3, 2),)),
    # the same, strict: no box closed by the constraint
    "constrained, strict": _problem((x - HALF) ** 2 + (y - HALF) ** 2 - sp.Rational(1, 100), strict=True,
                                    constraints=(x + y - sp.Rational(3, 2),)),
    # projected onto the corner (0, 0) and decided there exactly
    "corner": _problem(x + y**3 + ZERO_IN_DISGUISE),
    # x's upper end infinite
    "unbounded": _problem(1 + sp.exp(-x) + y, ((0.0, math.inf), (0.0, 1.0))),
    # x = t = 1/L, y the largest weight (y >= t): alpha_max > 1/(2L), strict, approached only as t -> 0 along y = t;
    # closed by the multiplier 3/2 of the constraint: core - 3/2 (y - t) = (y + t)/2 grows in t and is >= 0 at t = 0
    "multiplier": _problem(2 * y - x, strict=True, constraints=(y - x,), x_kind="length"),
}
FALSE = {
    "second-order": [dataclasses.replace(TRUE["second-order"], strict=True),
                     dataclasses.replace(TRUE["second-order"], core=TRUE["second-order"].core - sp.Rational(1, 10**9))],
    "edge": [dataclasses.replace(TRUE["edge"], strict=True),
             dataclasses.replace(TRUE["edge"], core=TRUE["edge"].core - sp.Rational(1, 10**12))],
    "constrained": [dataclasses.replace(TRUE["constrained"], core=TRUE["constrained"].core - sp.Rational(1, 8))],
    "corner": [dataclasses.replace(TRUE["corner"], strict=True),
               dataclasses.replace(TRUE["corner"], core=TRUE["corner"].core - sp.Rational(1, 10**30))],
    # alpha_max > 1/L (0 at equal weights, y = t) and alpha_max > (1 + 1e-9)/(2L) lowered below 0 near t = y = 0
    "multiplier": [dataclasses.replace(TRUE["multiplier"], core=y - x),
                   dataclasses.replace(TRUE["multiplier"], core=2 * y - x - sp.Rational(1, 10**9))],
}


@pytest.fixture(scope="module")
def proofs() -> dict[str, list[str]]:
    """Each true problem's proof tree, as tokens."""
    out = {}
    for name, problem in TRUE.items():
        outcome = bnb.branch_and_bound(problem, 10**7)
        assert outcome.status == "proved", (name, outcome.reason)
        out[name] = bnb.decode(outcome.tree.encode(), 10**8)
    return out


def test_the_proofs_hold_the_entries_the_tampering_needs_and_replay(proofs: dict[str, list[str]]) -> None:
    kinds = {name: {t[0] for t in tokens} for name, tokens in proofs.items()}
    assert {"S", "P", "C", "T"} <= kinds["second-order"] and "I" in kinds["constrained"], kinds
    assert proofs["corner"] == ["P0-,1-", "E"], proofs["corner"]
    assert {"Cnatural:0", "Cmean-value:0"} <= set(proofs["second-order"])
    assert proofs["multiplier"] == ["L0:3/2"], proofs["multiplier"]
    for name, tokens in proofs.items():
        ok, why, leaves = bnb.replay(TRUE[name], tokens)
        assert ok and leaves == sum(t[0] in "CIELMT" for t in tokens), (name, why)


def _first(tokens: list[str], kind: str) -> int:
    return next(i for i, t in enumerate(tokens) if t.startswith(kind))


def _replace(kind: str, new: Callable[[str], str]) -> Callable[[list[str]], list[str]]:
    """The first entry of ``kind`` replaced by ``new(entry)``."""
    def edit(tokens: list[str]) -> list[str]:
        i = _first(tokens, kind)
        return [*tokens[:i], new(tokens[i]), *tokens[i + 1:]]
    return edit


def _split_at(end: int) -> Callable[[str], str]:
    """A split entry moved onto an end (0: lower, 1: upper) of the root box's coordinate it splits, or past it."""
    def edit(tok: str) -> str:
        d = int(tok[1:].split(":")[0])
        box = TRUE["second-order"].coordinates[d]
        return f"S{d}:{(box.lo, box.hi, box.hi + 1.0)[end].hex()}"
    return edit


#: (true problem, a tampering of its proof, what the replay says): each one of the replay's refusals
TAMPERINGS: dict[str, tuple[str, Callable[[list[str]], list[str]], str]] = {
    "the last entry dropped": ("second-order", lambda t: t[:-1], "the encoding ends before every box is accounted"),
    "an entry appended": ("second-order", lambda t: [*t, "Cnatural:0"], "the encoding has more entries than boxes"),
    "a split along coordinate n": ("second-order", _replace("S", lambda t: "S2" + t[t.index(":"):]),
                                   "a split along coordinate 2, which the problem does not have"),
    "a split along coordinate -1": ("second-order", _replace("S", lambda t: "S-1" + t[t.index(":"):]),
                                    "a split along coordinate -1, which the problem does not have"),
    "a split at the box's lower end": ("second-order", _replace("S", _split_at(0)), "outside its box"),
    "a split at the box's upper end": ("second-order", _replace("S", _split_at(1)), "outside its box"),
    "a split past the box": ("second-order", _replace("S", _split_at(2)), "outside its box"),
    "a projection onto t = 0 along a parameter": ("second-order", _replace("P0-", lambda t: "P0<" + t[3:]),
                                                  "onto a limit along"),
    "a projection onto the end the core grows towards": ("corner", _replace("P", lambda t: "P0+,1-"),
                                                          "the core is not monotone in x on a projected box"),
    "a projection of the second coordinate the wrong way": ("corner", _replace("P", lambda t: "P0-,1+"),
                                                            "the core is not monotone in y on a projected box"),
    "a projection onto an infinite end": ("unbounded", lambda t: ["P0+", *t],
                                          "a projection onto an infinite end of x"),
    "a closing form the face lacks": ("second-order", _replace("Cnatural", lambda t: "Cnatural:7"),
                                      "a box closed by form 7, which its face does not have"),
    "a negative closing form": ("second-order", _replace("Cmean-value", lambda t: "Cmean-value:-1"),
                                "a box closed by form -1, which its face does not have"),
    "an unknown closing method": ("second-order", _replace("Cnatural", lambda t: "Cguessed:0"),
                                  "unknown closing method 'guessed'"),
    "infeasible by a constraint the problem lacks": ("constrained", _replace("I", lambda t: "I1"),
                                                     "a box said infeasible by constraint 1, which the problem does not "
                                                     "have"),
    "a feasible box said infeasible": ("constrained", _replace("Cnatural", lambda t: "I0"),
                                       "a box said infeasible by constraint 0 is not"),
    "infeasible in a problem without constraints": ("second-order", _replace("Cnatural", lambda t: "I0"),
                                                    "a box said infeasible by constraint 0, which the problem does not "
                                                    "have"),
    "closed by a constraint the problem lacks": ("second-order", _replace("Cnatural", lambda t: "M0"),
                                                 "a box closed by constraint 0, which the problem does not have"),
    "closed by a constraint under a strict bound": ("constrained, strict", _replace("Cnatural", lambda t: "M0"),
                                                    "a box closed by a constraint where that rule does not apply"),
    "closed by a constraint the core is no multiple of": ("constrained", _replace("Cnatural", lambda t: "M0"),
                                                          "a box closed by constraint 0 does not re-check"),
    "the two ends of a convex coordinate": ("second-order", lambda t: ["A0", *t[1:]],
                                            "the core is not concave in x: its two ends do not bound it"),
    "an exact point on a box": ("second-order", _replace("Cmean-value", lambda t: "E"),
                                "an exact point that is not a point"),
    "an exact point on the root box": ("corner", lambda t: ["E"], "an exact point that is not a point"),
    "the two ends of a projected coordinate": ("corner", _replace("E", lambda t: "A0"),
                                               "the two ends of x on a box where it is a point or unbounded"),
    "the two ends of an unbounded coordinate": ("unbounded", lambda t: ["A0", "Cnatural:0", "Cnatural:0"],
                                                "the two ends of x on a box where it is a point or unbounded"),
    "the two ends of coordinate n": ("corner", _replace("E", lambda t: "A2"), "the two ends of coordinate '2'"),
    "the two ends of no coordinate": ("corner", _replace("E", lambda t: "A-0"), "the two ends of coordinate '-0'"),
    "a second-order point of too few fractions": ("second-order", _replace("T", lambda t: "T1/2"),
                                                  "a second-order closure around '1/2', not 2 fractions"),
    "a second-order point that is not the critical point": ("second-order", _replace("T", lambda t: "T1/2,1/2"),
                                                             "a box closed to second order does not re-check"),
    "a second-order point outside its box": ("second-order", _replace("T", lambda t: "T0/1,0/1"),
                                             "a box closed to second order does not re-check"),
    "a box left open": ("second-order", _replace("C", lambda t: "O"), "an open box"),
    "a negative multiplier": ("multiplier", lambda t: ["L0:-3/2"], "a negative multiplier -3/2 of constraint 0"),
    "a multiplier that leaves the residual flat in t": ("multiplier", lambda t: ["L0:1/1"],
                                                        "with the multiplier 1 does not re-check"),
    "a multiplier too large": ("multiplier", lambda t: ["L0:3/1"], "with the multiplier 3 does not re-check"),
    "a multiplier of a constraint the problem lacks": ("multiplier", lambda t: ["L1:3/2"],
                                                       "a box closed by constraint 1, which the problem does not have"),
    "a multiplier in a problem without constraints": ("second-order", _replace("Cnatural", lambda t: "L0:1/1"),
                                                      "a box closed by constraint 0, which the problem does not have"),
    "a multiplier that is no fraction": ("multiplier", lambda t: ["L0:3"], "that is not L<constraint>:<p>/<q>"),
    "a multiplier of too many digits": ("multiplier", lambda t: ["L0:" + "3" * 21 + "/2"],
                                        "that is not L<constraint>:<p>/<q>"),
    "a multiplier on the ends of a coordinate": ("multiplier", lambda t: ["A1", "L0:3/2", "L0:3/2"],
                                                 "a multiplier closure on a box whose constraints read a range kept"),
}


@pytest.mark.parametrize("case", sorted(TAMPERINGS))
def test_a_tampered_proof_is_refused_saying_why(proofs: dict[str, list[str]], case: str) -> None:
    name, tamper, why = TAMPERINGS[case]
    tokens = tamper(list(proofs[name]))
    assert tokens != proofs[name]
    ok, what, _ = bnb.replay(TRUE[name], tokens)
    assert not ok and why in what, (tokens, what)


@pytest.mark.parametrize("name", sorted(FALSE))
def test_a_proof_does_not_replay_on_a_false_twin_of_its_problem(proofs: dict[str, list[str]], name: str) -> None:
    """A strict bound at the proof's equality, or the core lowered below it: the same tree no longer re-checks (at
    the corner: the exact point itself says why)."""
    for twin in FALSE[name]:
        ok, what, _ = bnb.replay(twin, proofs[name])
        assert not ok, (twin.core, twin.strict, what)
        if name == "corner":
            assert "an exact point does not re-check" in what, what


#: entries of every kind, their coordinates, forms and constraints in range or just out of it
VOCABULARY = ("S0:0x1.0p-1", "S1:0x0.0p+0", "S0:-0x1.0p+0", "S2:0x1.0p-1", "P0-", "P0+", "P1-", "P1+", "P0-,1-", "P0+,1+",
              "P0<", "P2-", "Cnatural:0", "Cnatural:1", "Cmean-value:0", "Cnatural:9", "I0", "I1", "M0", "M1", "E", "A0",
              "A1", "A2", "T1/2,1/3", "T0/1,0/1", "T1/2,1/2", "T1/2", "L0:3/2", "L0:1/1", "L0:2/1", "L0:0/1", "L1:1/1",
              "L0:-1/1", "O")


def _replays(problem: Problem, tokens: list[str], programs: bnb.Programs | None = None) -> bool:
    """Whether the tree replays on the problem (a malformed tree does not: the certificate replay refuses it)."""
    try:
        return bnb.replay(problem, tokens, programs=programs)[0]
    except MALFORMED:
        return False


@pytest.mark.parametrize("name", ["edge", "constrained", "corner", "multiplier"])
def test_no_entry_of_a_small_proof_replaced_dropped_or_repeated_proves_its_false_twin(proofs: dict[str, list[str]],
                                                                                     name: str) -> None:
    """Every entry of a small proof replaced by each entry of :data:`VOCABULARY`, dropped, or repeated: no such tree
    replays on a false twin of its problem."""
    tokens = proofs[name]
    assert len(tokens) <= 24, len(tokens)
    twins = [(twin, bnb.Programs.build(twin)) for twin in FALSE[name]]  # compiled once: the replay only reads them
    for i in range(len(tokens)):
        edits = [[*tokens[:i], new, *tokens[i + 1:]] for new in VOCABULARY if new != tokens[i]]
        for edited in [*edits, [*tokens[:i], *tokens[i + 1:]], [*tokens[:i + 1], *tokens[i:]]]:
            for twin, programs in twins:
                assert not _replays(twin, edited, programs), (edited, twin.core, twin.strict)


@st.composite
def _entries(draw: st.DrawFn, tokens: list[str]) -> str:
    """An entry of any kind, its coordinate, form or constraint in or just out of range, or an entry of the tree."""
    d = draw(st.integers(-1, 2))
    k = draw(st.integers(-1, 2))
    point = draw(st.sampled_from([-1.0, -0.5, 0.0, 1e-300, 1 / 3, 0.5, 1.0, 2.0, math.inf]))
    side = draw(st.sampled_from("+-<"))
    fraction = draw(st.sampled_from(["1/2", "1/3", "0/1", "-1/3", "2/1"]))
    return draw(st.sampled_from([
        f"S{d}:{point.hex()}", f"P{d}{side}", f"P0{side},1{draw(st.sampled_from('+-<'))}", f"Cnatural:{k}",
        f"Cmean-value:{k}", f"I{k}", f"M{k}", "E", f"A{d}", f"T{fraction},{fraction}", f"T{fraction}", "O",
        *tokens]))


@st.composite
def _tamperings(draw: st.DrawFn, proofs: dict[str, list[str]]) -> tuple[str, list[str]]:
    """A proof with one entry replaced, dropped, inserted or repeated."""
    name = draw(st.sampled_from(sorted(FALSE)))
    tokens = list(proofs[name])
    i = draw(st.integers(0, len(tokens) - 1))
    how = draw(st.sampled_from(["replace", "drop", "insert", "repeat"]))
    if how == "replace":
        tokens[i] = draw(_entries(tokens))
    elif how == "drop":
        del tokens[i]
    elif how == "insert":
        tokens.insert(i, draw(_entries(tokens)))
    else:
        tokens.insert(i, tokens[i])
    return name, tokens


def test_no_single_entry_tampering_of_a_proof_proves_a_false_twin(proofs: dict[str, list[str]]) -> None:
    """Whatever one entry of a real proof becomes, the tree is refused (or malformed) on every false twin of its
    problem; on the true problem it is refused, malformed, or still a proof of it."""
    programs = {id(p): bnb.Programs.build(p) for p in [*TRUE.values(), *(t for ts in FALSE.values() for t in ts)]}

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(case=_tamperings(proofs))
    def check(case: tuple[str, list[str]]) -> None:
        name, tokens = case
        for twin in FALSE[name]:
            assert not _replays(twin, tokens, programs[id(twin)]), (name, tokens, twin.core, twin.strict)
        _replays(TRUE[name], tokens, programs[id(TRUE[name])])

    check()


def _blob(data: bytes) -> str:
    return base64.b64encode(zlib.compress(data)).decode()


@pytest.mark.parametrize(("blob", "why"), [
    (_blob(b'["Cnatural:0", '), "not base64 of zlib of a JSON list"),
    (_blob(b"Cnatural:0"), "not base64 of zlib of a JSON list"),
    (base64.b64encode(b"\x78\x9c not deflate").decode(), "not base64 of zlib of a JSON list"),
    ("@@", "not base64 of zlib of a JSON list"),
    (_blob('["Cnatural:0\u00e9"]'.encode()), "not base64 of zlib of a JSON list"),
    (_blob(b'{"a": 1}'), "must be a list of box entries"),
    (_blob(b'["Cnatural:0", ""]'), "must be a list of box entries"),
    (_blob(b'["Cnatural:0", 1]'), "must be a list of box entries"),
    (_blob(b'["Cnatural:0"]')[:12], "inflates beyond"),
    (_blob(b'["' + b"E" * 200 + b'"]'), "inflates beyond"),
])
def test_decode_refuses_what_is_not_a_packed_list_of_entries(blob: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        bnb.decode(blob, 100)
    assert bnb.decode(_blob(b'["Cnatural:0"]'), 100) == ["Cnatural:0"]


# -- certificates of a statement -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def certified() -> tuple[Any, dict[str, Any]]:
    """A statement proved in a few boxes (one closed by its constraint) and its certificate, as JSON reads it."""
    statement = api.statement("alpha_max >= 1/L", hypotheses=["softmax"], id="refusals").statements[0]
    result = prover.prove(statement, work=prover.work_for(1.0))
    assert result.status == "proved", result.reason
    certificate = json.loads(json.dumps(result.to_json()))
    assert prover.replay(statement, certificate)[0]
    return statement, certificate


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], Any]:
    def edit(certificate: dict[str, Any]) -> Any:
        if not path:
            return value
        target = certificate
        for p in path[:-1]:
            target = target[p]
        target[path[-1]] = value
        return certificate
    return edit


def _face_key(key: str) -> Callable[[dict[str, Any]], Any]:
    def edit(certificate: dict[str, Any]) -> Any:
        problem = certificate["problems"][0]
        forms = next(iter(problem["faces"].values()))
        problem["faces"] = {key: forms}
        return certificate
    return edit


#: a certificate edited to a wrong shape, and what the replay's InvalidArgument says
SHAPES: dict[str, tuple[Callable[[dict[str, Any]], Any], str]] = {
    "not an object": (_set((), ["proved"]), "relaxation. must be an object"),
    "open": (_set(("status",), "open"), "only a proved certificate is replayed"),
    "no status": (_set(("status",), None), "only a proved certificate is replayed"),
    "no problems": (_set(("problems",), []), "relaxation.problems must be a non-empty list"),
    "problems an object": (_set(("problems",), {"0": {}}), "relaxation.problems must be a non-empty list"),
    "a hash that is a number": (_set(("boxes_sha256",), 0), "relaxation.boxes_sha256 must be a string"),
    "a problem that is a list": (_set(("problems", 0), []), "relaxation.problems[0] must be an object"),
    "a box count that is a flag": (_set(("problems", 0, "boxes"), True),
                                   "relaxation.problems[0].boxes must be a whole number"),
    "a face of numbers": (_set(("problems", 0, "faces"), {"[]": [1]}), "faces['[]'] must be a list of expressions"),
    "a face that is one text": (_set(("problems", 0, "faces"), {"[]": "Integer(1)"}), "must be a list of expressions"),
    "a face key too long": (_face_key("[" + " " * 10_000 + "]"), "is not a list of (coordinate, value) pairs: too long"),
    "a face key that is a tuple": (_face_key("((0, 0.0),)"), "a face key must be a list"),
    "a face key that is a number": (_face_key("0"), "a face key must be a list"),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_a_certificate_of_the_wrong_shape_is_refused_naming_the_field(certified: tuple[Any, dict[str, Any]],
                                                                      case: str) -> None:
    statement, certificate = certified
    edit, why = SHAPES[case]
    with pytest.raises(InvalidArgument) as refused:
        prover.replay(statement, edit(json.loads(json.dumps(certificate))))
    assert why in str(refused.value), str(refused.value)


def test_a_certificate_whose_box_hash_is_not_its_trees_is_refused(certified: tuple[Any, dict[str, Any]]) -> None:
    statement, certificate = certified
    for digest in ("0" * 64, certificate["boxes_sha256"].upper(), ""):
        ok, why = prover.replay(statement, dict(certificate, boxes_sha256=digest))
        assert not ok and "the hash of the box lists differs from the certificate's" in why, why


@pytest.fixture(scope="module")
def limit_proof() -> tuple[Problem, list[str]]:
    """A strict bound whose proof projects onto the limit t = 0 (L -> oo), with its relaxed problem."""
    statement = api.statement("alpha_i < 3/(2*L)", normaliser=BSIG, id="refusals.limit").statements[0]
    result = prover.prove(statement, work=prover.work_for(1.0))
    assert result.status == "proved", result.reason
    (report,) = result.reports
    return report.problem, bnb.decode(report.outcome.tree.encode(), 10**8)


def test_a_projection_onto_the_limit_is_only_for_a_strict_bound_at_t_0(limit_proof: tuple[Problem, list[str]]) -> None:
    """The real projection onto t = 0 replays on its strict problem, and is refused where the bound is not strict,
    where t is not the length axis, or where the box does not reach t = 0."""
    problem, tokens = limit_proof
    assert any("<" in t for t in tokens if t.startswith("P")), tokens
    assert bnb.replay(problem, tokens)[0]
    t_axis = next(d for d, c in enumerate(problem.coordinates) if c.kind == "length")
    coordinates = list(problem.coordinates)
    away = dataclasses.replace(coordinates[t_axis], lo=2.0**-20)
    for twin in (dataclasses.replace(problem, strict=False),
                 dataclasses.replace(problem, coordinates=[dataclasses.replace(c, kind="parameter") for c in coordinates]),
                 dataclasses.replace(problem, coordinates=[away if d == t_axis else c for d, c in enumerate(coordinates)])):
        ok, what, _ = bnb.replay(twin, tokens)
        assert not ok and "onto a limit along" in what, what


def test_a_multiplier_closure_on_an_unbounded_box_is_refused() -> None:
    """``core - lam c`` is read by its mean-value bound about a centre, which an unbounded box has not: the replay
    refuses a multiplier closure there, whatever the multiplier. The statement is false (``y - x < 0`` once
    ``x > 1``), and ``core - c = 1/2 - x`` would look flat in y."""
    false = _problem(y - x, ((0.0, math.inf), (0.0, 1.0)), constraints=(y - HALF,))
    assert bnb.branch_and_bound(false, 10**6).status != "proved"
    for lam in ("1/1", "1/2", "0/1"):
        ok, what, _ = bnb.replay(false, [f"L0:{lam}"])
        assert not ok and "does not re-check" in what, (lam, what)


@pytest.mark.parametrize("t_lo", [None, 2.0**-10])
def test_a_strict_bound_is_not_closed_by_a_residual_that_is_exactly_0(t_lo: float | None) -> None:
    """``y - x > 0`` where ``y >= x`` is false at ``y = x``; the multiplier 1 leaves the residual ``0``: a strict
    bound closes at a residual bound of 0 only off an open end it grows away from, or at the limit t = 0 to second
    order. Neither holds without a length axis, or with one whose box does not reach t = 0: refused."""
    box = ((0.0, 1.0), (0.0, 1.0)) if t_lo is None else ((t_lo, 0.5), (0.0, 1.0))
    false = _problem(y - x, box, strict=True, constraints=(y - x,), x_kind="parameter" if t_lo is None else "length")
    assert bnb.branch_and_bound(false, 10**6).status != "proved"
    ok, what, _ = bnb.replay(false, ["L0:1/1"])
    assert not ok and "with the multiplier 1 does not re-check" in what, what


def test_the_prover_claims_proved_only_for_trees_that_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    """``prove`` replays each closed problem's tree from its tokens before it counts (what ``prove --replay`` does
    later): with a replay that refuses every tree, a statement the prover closes (softmax ``J_row <= 1/(2T)``) is not
    proved, and the reason says the tree did not replay; with the real replay it is proved."""
    from attnbounds.theory.mathematics import registry

    statement = registry.get("corollary3[row,corrected]")
    assert prover.prove(statement, work=10**8).status == "proved"
    monkeypatch.setattr(prover, "replay_tree", lambda problem, tokens, programs=None: (False, "refused", 0))
    result = prover.prove(statement, work=10**8)
    assert result.status != "proved" and "did not replay (refused)" in result.reason, result.reason


def test_a_closure_naming_a_form_one_past_the_faces_last_is_refused_not_raised() -> None:
    """A natural closure names the form of its face it used (``Cnatural:<k>``): every k from 0 up is either one of the
    root face's forms (the untampered tree replays with its own) or refused with a message naming it, never an
    IndexError from the form list (k equal to the number of forms is the first one past the end)."""
    st_ = api.statement("alpha_max <= 1", hypotheses=["softmax"], id="forms").statements[0]
    report = prover._prove(st_, work=prover.work_for(0.5)).reports[0]
    tokens = bnb.decode(report.outcome.tree.encode(), 10**8)
    assert tokens == ["Cnatural:0"], tokens
    forms = len(bnb.Programs.build(report.problem).face(()).forms)
    for k in range(forms + 2):
        ok, what, _ = bnb.replay(report.problem, [f"Cnatural:{k}"])
        if k >= forms:
            assert not ok and f"form {k}, which its face does not have" in what, (k, what)
