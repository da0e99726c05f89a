"""attnbounds: a property-based verification suite for "Limitations of Normalization in Attention
Mechanism" (Mudarisov, Burtsev, Petrova, State; arXiv:2508.17821).

The public API, imported lazily so that ``import attnbounds`` stays fast::

    import attnbounds
    st = attnbounds.get("corollary3[spectral,corrected]")      # a statement reading (sympy + evaluator)
    inst = attnbounds.Instance.from_logits([[0.0, 1.0, 3.0]], attnbounds.normalisers.softmax(T=0.5))
    st.evaluate(inst).margin                                    # rhs - lhs per instance
    attnbounds.certify(st, inst).status                         # 'holds' / 'violated' / ... in interval arithmetic
    records = attnbounds.verify([st.id], budget_s=2)            # search + certify + proofs -> citable records
    r = attnbounds.check("J_spectral <= 1/(2*T)", hypotheses=["softmax"], budget=2)   # your own bound
    r.verdict, r.counterexample, r.cite()                       # attnbounds.assert_bound(...) raises on REFUTED
    t = attnbounds.tighten("J_entry <= C", hypotheses=["softmax"], fixed={"T": 1})  # the best C, as a bracket
    t.lower, t.upper, t.proved, t.refuted                       # REFUTED at one side, PROVED at the other
    p = attnbounds.profile("sparsemax", a=1, T=1)                # which of the paper's limits it escapes
    attnbounds.profile.compare(["softmax", "ssmax"])             # profiles side by side (a Markdown table)

Sub-packages: :mod:`attnbounds.theory` (statements, quantities, search, certification, records, CLI),
:mod:`attnbounds.proofs` (replayable derivations), :mod:`attnbounds.empirical` (the paper's
experiments on GPT-2-family models). Everything not listed in ``__all__`` is private by convention.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.2.0"

#: public name -> (module, attribute or None for the module itself)
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "Statement": ("attnbounds.theory.mathematics.statement", "Statement"),
    "Evaluation": ("attnbounds.theory.mathematics.statement", "Evaluation"),
    "Hypothesis": ("attnbounds.theory.mathematics.hypotheses", "Hypothesis"),
    "Citation": ("attnbounds.theory.mathematics.statement", "Citation"),
    "Instance": ("attnbounds.theory.mathematics.instance", "Instance"),
    "Quantity": ("attnbounds.theory.mathematics.quantities.spec", "Quantity"),
    "quantities": ("attnbounds.theory.mathematics.quantities", None),
    "normalisers": ("attnbounds.theory.mathematics.normalisers", None),
    "hypotheses": ("attnbounds.theory.mathematics.hypotheses", None),
    "registry": ("attnbounds.theory.mathematics.registry", None),
    "strategies": ("attnbounds.theory.mathematics.strategies", None),
    "get": ("attnbounds.theory.mathematics.registry", "get"),
    "all_statements": ("attnbounds.theory.mathematics.registry", "all_statements"),
    "certify": ("attnbounds.theory.deciding.certify", "certify"),
    "decide": ("attnbounds.theory.deciding.certify", "decide"),
    "Certificate": ("attnbounds.theory.deciding.certify", "Certificate"),
    "search": ("attnbounds.theory.deciding.search", "search"),
    "verify": ("attnbounds.theory.running.verify", "verify"),
    "check": ("attnbounds.theory.running.api", "check"),
    "load_statements": ("attnbounds.theory.io.userbounds", "load_statements"),
    "hypothesis_catalogue": ("attnbounds.theory.io.userbounds", "hypothesis_catalogue"),
    "assert_bound": ("attnbounds.theory.running.api", "assert_bound"),
    "tighten": ("attnbounds.theory.running.tighten", "tighten"),
    "TightenResult": ("attnbounds.theory.running.tighten", "TightenResult"),
    "profile": ("attnbounds.theory.running.profile", "profile"),
    "Profile": ("attnbounds.theory.running.profile", "Profile"),
    "ProfileRow": ("attnbounds.theory.running.profile", "ProfileRow"),
    "Comparison": ("attnbounds.theory.running.profile", "Comparison"),
    "Record": ("attnbounds.theory.io.records", "Record"),
    "AttnBoundsError": ("attnbounds.theory.mathematics.errors", "AttnBoundsError"),
    "InvalidArgument": ("attnbounds.theory.mathematics.errors", "InvalidArgument"),
    "NotApplicable": ("attnbounds.theory.mathematics.errors", "NotApplicable"),
    "CannotCertify": ("attnbounds.theory.mathematics.errors", "CannotCertify"),
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'attnbounds' has no attribute {name!r}") from None
    value = importlib.import_module(module)
    if attribute is not None:
        value = getattr(value, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
