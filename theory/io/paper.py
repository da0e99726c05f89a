"""The paper's own statements, beside the readings that make them precise, and the erratum they add up to.

:data:`PRINTED` holds, per result of arXiv:2508.17821 (the part of a reading's id before ``[``), what the paper
prints, as far as the sources recovered it (the words are those of the project's reading of the paper; where a
display formula was not recovered, that is said). :func:`sibling` pairs a printed reading with its corrected form
(``result[reading]`` and ``result[reading,corrected]``, :mod:`attnbounds.theory.mathematics.statements.corrections`).
:func:`erratum` groups a records file by result: which readings hold, which do not, and the corrected forms with
their verdicts; ``attnbounds table --erratum`` and the first section of ``attnbounds report`` show it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from attnbounds.theory.mathematics.statement import ARXIV, PAPER_VERSION

#: the paper's abstract page, at the version the readings were written from
ARXIV_URL = f"https://arxiv.org/abs/{ARXIV.split(':', 1)[1]}{PAPER_VERSION.split()[0]}"


@dataclass(frozen=True)
class Printed:
    """What the paper prints for one result: its numbering, the statement and, when it has one, a remark on
    what the sources leave open."""

    numbering: str
    statement: str
    open: str = ""

    @property
    def url(self) -> str:
        return ARXIV_URL


PRINTED: dict[str, Printed] = {
    "lemma1": Printed(
        "Lemma 1 (vanishing attention)",
        "If F does not depend explicitly on L and the logits are bounded, l_i in [-a, a], then "
        "C_1/L <= alpha_i <= C_2/L with constants C_1, C_2 independent of L.",
        "The constants are not given; the proof takes the extrema of F on [-a, a]."),
    "corollary1": Printed(
        "Corollary 1 (softmax)",
        "exp(-2 Delta/T)/L <= alpha_i <= exp(2 Delta/T)/L with Delta = ||q||_2 ||k||_2.",
        "Which key k enters Delta (the i-th key, or the largest) is not said."),
    "theorem1.fixed": Printed(
        "Theorem 1 (fixed top-N set)",
        "dtilde <= (1 - abar_N) d_1 + max_{j in I_N} ||x_j||_2 abar_N (L - N) - (1 - abar_N).",
        "The grouping of the second term is lost in the sources, and dtilde has two readings: R1, the sum of the "
        "norms ||alpha_i x_i - s||_2 over the tokens outside I_N, and R2, the norm of the sum."),
    "theorem1.random": Printed(
        "Theorem 1 (random N-subset)",
        "E[dtilde] = (L - N)/L sum_i ||(alpha_i + N/(L-1)) x_i - xbar||_2 + eps, with eps >= 0 the Jensen gap, small "
        "when the weights are not too concentrated.",
        "xbar is not defined in the sources and the paper's bound on eps was not recovered."),
    "corollary2.i": Printed(
        "Corollary 2 (i)",
        "N fixed, L growing: E[dtilde] ~ sum_i ||alpha_i x_i||_2.",
        "The rate of the approximation is not given."),
    "corollary2.ii": Printed(
        "Corollary 2 (ii)",
        "L fixed, N -> L: E[dtilde] -> 0."),
    "theorem2.lower": Printed(
        "Theorem 2 (geometric separability, lower bound)",
        "Under Assumptions 1 and 2 (embeddings uniform on the sphere of radius M, pairwise distances >= delta): "
        "1 - (1/(r N)) sum_{i in I_N} xi_i <= E[N_s]/N.",
        "The display formula of xi_i was not recovered; it is encoded from the proof."),
    "theorem2.upper": Printed(
        "Theorem 2 (geometric separability, upper bound)",
        "Under Assumptions 1 and 2: E[N_s]/N <= (1/N) sum_{i in I_N} exp(-(r - xi_i)^2/(16 M^2)).",
        "The Hoeffding constant 16 is a parameter (C_H) of the readings."),
    "lemma2": Printed(
        "Lemma 2 (Jacobian of a general normaliser)",
        "The display formula was not recovered. The prose: the upper bound on ||grad_l alpha|| grows when any "
        "F(l_j) approaches zero, because both terms inside the parentheses scale inversely with min_j F(l_j).",
        "The readings are two-term bounds of that shape, derived by attnbounds."),
    "corollary3": Printed(
        "Corollary 3 (softmax)",
        "||grad_l alpha||_2 <= min(1/(4T), sqrt(2)): the classic 1/(4T) instability; a sharper softmax (lower T) "
        "has larger gradients.",
        "Which norm of the Jacobian is meant is not said."),
    "multihead": Printed(
        "Discussion (multi-head remark)",
        "Independent heads that each separate a fraction p cover 1 - (1 - p)^H; for p = 0.8 and H = 3 about 99 %."),
}

CORRECTED = "corrected"


@dataclass(frozen=True)
class Alternative:
    """The paper's closing explanation of one alternative to softmax: which limit it addresses, the registry names
    it may have, and the rows of a profile (:mod:`attnbounds.theory.running.profile`) that bear on the claim."""

    name: str
    names: tuple[str, ...]
    claim: str
    rows: tuple[str, ...]


#: the paper's closing explanation of the alternatives (its prose, in the project's words): each addresses one of
#: the limits the paper identifies; a profile certifies or refutes the part each row bears on
ALTERNATIVES: tuple[Alternative, ...] = (
    Alternative("Sparsemax", ("sparsemax",),
                "sparsity addresses vanishing attention: weights need not be of order 1/L under bounded logits",
                ("vanish.max", "vanish.min", "vanish.escape", "collapse.mass")),
    Alternative("Scalable-Softmax", ("ssmax",),
                "length awareness (logits scaled by s log L) keeps attention from vanishing as the context grows",
                ("vanish.max", "vanish.escape", "collapse.mass")),
    Alternative("Self-Adjusted Softmax", ("sa_softmax",),
                "gradient stability: the trade-off between separability and gradient size set by the temperature",
                ("grad.entry", "grad.row", "grad.frobenius", "grad.spectral")),
)


def result_of(statement_id: str) -> str:
    """The result a reading belongs to (``theorem1.fixed`` for ``theorem1.fixed[R1,g2]``)."""
    return statement_id.split("[", 1)[0]


def is_corrected(statement_id: str) -> bool:
    return statement_id.endswith(f",{CORRECTED}]")


def sibling(statement_id: str) -> str | None:
    """The corrected form of a printed reading, or the printed reading of a corrected form (``None`` for an id
    without a reading in brackets); whether it exists is for the caller to look up."""
    if not statement_id.endswith("]") or "[" not in statement_id:
        return None
    if is_corrected(statement_id):
        return statement_id[: -len(f",{CORRECTED}]")] + "]"
    return statement_id[:-1] + f",{CORRECTED}]"


@dataclass
class Entry:
    """One result of the paper in a records file: its readings by verdict (ids in file order)."""

    result: str
    printed: Printed | None
    holds: list[tuple[str, str]] = field(default_factory=list)  # (id, verdict) of printed readings that hold
    fails: list[tuple[str, str]] = field(default_factory=list)  # REFUTED printed readings
    open: list[tuple[str, str]] = field(default_factory=list)  # UNDECIDED, NOT-APPLICABLE, ERROR
    corrected: list[tuple[str, str]] = field(default_factory=list)  # corrected forms, any verdict

    @property
    def summary(self) -> str:
        """One sentence: how many readings hold and fail, and whether a corrected form is proved."""
        def many(n: int, one: str, more: str) -> str:
            return f"{n} {one if n == 1 else more}"

        parts = []
        if self.holds:
            parts.append(many(len(self.holds), "printed reading holds", "printed readings hold"))
        if self.fails:
            parts.append(many(len(self.fails), "printed reading is refuted", "printed readings are refuted"))
        if self.open:
            parts.append(many(len(self.open), "printed reading is not settled", "printed readings are not settled"))
        proved = [i for i, v in self.corrected if v == "PROVED"]
        if proved:
            parts.append(many(len(proved), "corrected form is proved", "corrected forms are proved"))
        text = "; ".join(parts) if parts else "no reading in this file"
        return text[0].upper() + text[1:] + "."


HOLDS = ("PROVED", "VERIFIED")
FAILS = ("REFUTED",)


def erratum(rows: Iterable[tuple[str, str, str]]) -> list[Entry]:
    """The paper's results in a records file, in the order they first appear; ``rows`` are ``(id, verdict,
    source)`` per record (a user's own statements, ``source == "user"``, are left out)."""
    entries: dict[str, Entry] = {}
    for statement_id, verdict, source in rows:
        if source == "user":
            continue
        result = result_of(statement_id)
        entry = entries.setdefault(result, Entry(result, PRINTED.get(result)))
        pair = (statement_id, verdict)
        if is_corrected(statement_id):
            entry.corrected.append(pair)
        elif verdict in HOLDS:
            entry.holds.append(pair)
        elif verdict in FAILS:
            entry.fails.append(pair)
        else:
            entry.open.append(pair)
    return list(entries.values())


def why(data: dict[str, Any]) -> str:
    """One sentence saying why a record has its verdict, from the record alone (a valid record's JSON)."""
    verdict = data["verdict"]
    closed = data.get("closed_claim")
    if closed is not None:
        return f"It is a closed claim, decided exactly: {data['reason']}"
    if verdict == "PROVED":
        relaxed = data.get("relaxation") or {}
        by_relaxation = relaxed.get("status") == "proved"
        if data.get("proof") is None:
            return (f"The relaxation prover closed every box of the statement's relaxation ({relaxed.get('boxes')} "
                    "boxes, every L at once; see Proof) and the search found no counterexample.")
        return (f"The derivation {data['proof']['name']} replays completely (see Proof)"
                + (", the relaxation prover proves it too," if by_relaxation else "")
                + " and the search found no counterexample.")
    if verdict == "REFUTED":
        cx = data["counterexample"]
        if data.get("certified", True) is False:
            f = cx["float"]
            return (f"At L = {cx['L']} the lhs {_short(f['lhs'])} exceeds the rhs {_short(f['rhs'])} in float64 "
                    "arithmetic (the normaliser is a Python function, so this is not certified).")
        cert = cx["certificate"]
        how = "a Monte Carlo interval" if cx["statistical"] else "interval arithmetic"
        return (f"At L = {cx['L']} the margin rhs - lhs is certified negative by {how}: lhs {_ball(cert.get('lhs'))}, "
                f"rhs {_ball(cert.get('rhs'))}.")
    if verdict == "VERIFIED":
        return (f"No counterexample in {data['search']['tried']} instances searched: evidence, not a proof "
                "(no derivation replays for it).")
    return f"{data['reason'][:1].upper()}{data['reason'][1:]}" if data["reason"] else verdict


def _short(value: Any) -> str:
    try:
        return f"{float(value):.4g}"
    except (TypeError, ValueError):
        return str(value)


def _ball(text: Any) -> str:
    """An arb ball ``[2.3000000000000001e-5 +/- 3.06e-30]`` as its midpoint to 4 digits (the text if it is not one)."""
    if isinstance(text, str) and text.startswith("[") and "+/-" in text:
        return _short(text[1:].split("+/-", 1)[0].strip())
    if isinstance(text, str) and text.startswith("[") and text.endswith("]"):
        return _short(text[1:-1])
    return _short(text)
