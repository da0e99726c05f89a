"""Refresh the stored counterexamples (:mod:`attnbounds.theory.io.counterexamples`) by searching and certifying.

Run from the repository root::

    python -m tests.oracle.refresh                 # every reading
    python -m tests.oracle.refresh lemma1 ...      # some readings
    python -m tests.oracle.refresh --examples 2000 --seeds 0 1 2 --budget 20

Counterexamples are only ever obtained by searching, then certified with
:func:`attnbounds.theory.deciding.certify.certify` before they are written; nothing is written by hand. Per reading:

1. an existing file that still certifies as violated is kept (``--replace`` searches anyway);
   a stale one is deleted;
2. the search runs, in this order, until a certified violation turns up: the oracle's own ``ci``
   search (:mod:`tests.oracle.check`, derandomised, so every violation the default test run can meet is found here
   first), seeded random hypothesis searches with targeting and shrinking (``--seeds``, ``--examples``),
   then the counterexample search :func:`attnbounds.theory.deciding.search.search` (``--budget``);
3. a deterministic certificate is preferred to a statistical (Monte Carlo) one: when only the
   latter is found, the searches run once more asking for a deterministic one.

The file records the instance (exact, :mod:`attnbounds.theory.io.serialize`), the certificate, and how it was
found (method, seed, examples, the shrunk spec). Exit status 0; a summary table is printed.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any, Iterator

from hypothesis import settings
from tqdm.auto import tqdm

from attnbounds.theory.mathematics import registry
from attnbounds.theory.deciding.certify import Certificate, certify
from attnbounds.theory.io.counterexamples import path_for, recertify, stored, write
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.deciding.search import search
from attnbounds.theory.mathematics.statement import Statement
from tests.oracle.check import CertifiedViolation, hypothesis_search, register_profiles


#: Monte Carlo level of a stored statistical counterexample (probability that it is wrong)
STORED_LEVEL = 1e-9


def _searches(st: Statement, args: argparse.Namespace, want: str) -> Iterator[tuple[dict[str, Any], Any]]:
    """``(provenance, finder)`` pairs in the order of the module docstring; finders return candidates."""
    register_profiles()
    ci = settings.get_profile("ci").max_examples
    yield ({"method": "hypothesis search over theory.strategies.specs, derandomised as in the ci profile",
            "examples": ci}, lambda: hypothesis_search(st, max_examples=ci, seed=None, want=want, level=STORED_LEVEL))
    for seed in args.seeds:
        yield ({"method": "hypothesis search over theory.strategies.specs (targeting, shrinking)", "seed": seed,
                "examples": args.examples},
               lambda seed=seed: hypothesis_search(st, max_examples=args.examples, seed=seed, want=want,
                                                   level=STORED_LEVEL))
    yield ({"method": "theory.search.search", "seed": args.seeds[0] if args.seeds else 0, "budget_s": args.budget},
           lambda: search(st, budget_s=args.budget, seed=args.seeds[0] if args.seeds else 0, progress=False))


def _certified(st: Statement, found: Any, want: str) -> tuple[Instance, Certificate, dict[str, Any]] | None:
    """The first candidate that certifies as violated (``want="deterministic"``: not statistically)."""
    if found is None:
        return None
    if isinstance(found, CertifiedViolation):
        cands = [(found.instance, {"batch_index": found.index, "spec": getattr(found, "spec", None)})]
    else:  # a theory.search result: candidate instances, best first
        cands = [(c.take(0), {"candidate_rank": k}) for k, c in enumerate(list(found.violations)[:16])]
    for inst, where in cands:
        if st.kind == "expectation" and "mc_level" not in inst.params:
            inst = inst.with_params(mc_level=STORED_LEVEL)
        cert = certify(st, inst, 0)
        if cert.status == "violated" and (want == "any" or not cert.statistical):
            return inst, cert, where
    return None


def refresh_one(st: Statement, args: argparse.Namespace) -> str:
    """Search and certify one reading's counterexample; what was done, in a few words."""
    old = recertify(st.id)
    if old is not None and old.status == "violated" and not args.replace:
        return f"kept ({old.method})"
    best = None
    for want in ("any", "deterministic"):
        for provenance, finder in _searches(st, args, want):
            hit = _certified(st, finder(), want)
            if hit is not None:
                best = (*hit, provenance)
                break
        if best is None or not best[1].statistical:
            break
    if best is None:
        if old is not None:
            path_for(st.id).unlink()
            return f"deleted stale file ({old.status}); no violation found"
        return "none found"
    inst, cert, where, provenance = best
    spec = where.pop("spec", None)
    provenance.update(where)
    if spec is not None:
        provenance["spec"] = spec
    write(st, inst, cert, provenance)
    if stored(st.id) is None or recertify(st.id).status != "violated":
        raise RuntimeError(f"{st.id}: the written counterexample does not re-certify; this is a bug")
    return f"written ({cert.method}{', statistical' if cert.statistical else ''})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.oracle.refresh", description=__doc__.split("\n")[0])
    parser.add_argument("ids", nargs="*", help="reading ids (default: every registered reading)")
    parser.add_argument("--examples", type=int, default=300, help="examples per seeded hypothesis search")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1], help="seeds of the random searches")
    parser.add_argument("--budget", type=float, default=10.0, help="seconds for theory.search.search per reading")
    parser.add_argument("--replace", action="store_true", help="search again even where a file still certifies")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", RuntimeWarning)  # overflow to inf in float kernels is expected and handled
    ids = args.ids or registry.ids()
    results = {}
    for sid in tqdm(ids, desc="refresh", unit="reading"):
        results[sid] = refresh_one(registry.get(sid), args)
    width = max(map(len, results))
    for sid, what in results.items():
        print(f"{sid.ljust(width)}  {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
