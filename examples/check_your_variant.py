"""Check your own attention variant in five minutes.

Two variants of softmax attention, written as plain torch functions ``fn(logits, T) -> weights``:

- scalable softmax (SSMax, Nakanishi 2025): the logits are scaled by ``s log L``, so the map depends on the
  context length L. Lemma 1 of the paper assumes it does not (its hypothesis ``F-length-independent``). We give
  attnbounds the formula ``log F = s log(L) l / T`` too, so its verdicts are certified in interval arithmetic;
- softpick (Zuhri et al. 2025): ``relu(e^x - 1) / sum |e^x - 1|``, not of the form F / sum F. No ``log F``:
  attnbounds searches it in float64 through torch but cannot certify anything about it (``certified: false``).

Run it (about 30 s on a laptop; small budgets)::

    python examples/check_your_variant.py

Every verdict below comes from the real search and certifier; the budget is ``$ATTNBOUNDS_BUDGET`` (default 1 s per
check here). The script exits with 0 when it ran through (whatever the verdicts), 1 when something it shows as
expected did not happen.
"""

from __future__ import annotations

import math
import os
import sys

import torch

import attnbounds

BUDGET = float(os.environ.get("ATTNBOUNDS_BUDGET", "1"))
S = 0.4  # SSMax's scale: the logits are multiplied by S * log(L)


def scalable_softmax(logits: torch.Tensor, T: float | torch.Tensor) -> torch.Tensor:
    """SSMax: softmax(s log(L) l / T) over the last axis."""
    L = torch.tensor(float(logits.shape[-1]), dtype=logits.dtype)
    return torch.softmax(S * torch.log(L) * logits / T, dim=-1)


def softpick(logits: torch.Tensor, T: float | torch.Tensor) -> torch.Tensor:
    """Softpick: relu(e^x - 1) / (sum_j |e^x_j - 1| + eps), x = l / T, computed stably (shifted by max(x, 0))."""
    x = logits / T
    m = x.max(dim=-1, keepdim=True).values.clamp(min=0.0)
    shifted = torch.exp(x - m) - torch.exp(-m)
    return torch.relu(shifted) / (shifted.abs().sum(-1, keepdim=True) + 1e-12 * torch.exp(-m))


SSMAX = {"name": "ssmax_mine", "torch": scalable_softmax, "log_F": "s*log(L)*l/T", "params": {"s": S}}
LEMMA1 = dict(hypotheses=["logits-bounded"], defaults={"a": "logit_absmax"})  # |l_i| <= a, a = max |l_i|
problems: list[str] = []


def show(title: str, record: attnbounds.Record, expected: tuple[str, ...]) -> None:
    tag = "" if record.certified else " (not certified)"
    print(f"\n== {title}\n   verdict: {record.verdict}{tag}")
    print(f"   {record.reason[:300]}")
    if record.verdict not in expected:
        problems.append(f"{title}: {record.verdict}, expected {' or '.join(expected)}")


def main() -> int:
    print(f"attnbounds {attnbounds.__version__}; budget {BUDGET:g} s per check")

    # 1. Lemma 1 as the paper states it: its hypothesis F-length-independent fails for SSMax (computed from log F)
    r = attnbounds.check("alpha_i >= C_1/L", hypotheses=["F-positive", "F-length-independent", "logits-bounded"],
                         defaults={"a": "logit_absmax"}, normaliser=SSMAX, budget=BUDGET)
    show("Lemma 1 (C_1/L <= alpha_i) for SSMax: the hypotheses do not hold", r, ("NOT-APPLICABLE",))

    # 2. What the length dependence costs: softmax's constant exp(-2a/T) (a fixed temperature, L in a range)
    fixed, ranges = {"T": 1.0}, {"L": [2, 100_000]}
    r = attnbounds.check("alpha_i >= exp(-2*a/T)/L", normaliser="softmax", fixed=fixed, ranges=ranges, budget=BUDGET,
                         **LEMMA1)
    show("softmax: alpha_i >= exp(-2a/T)/L with T = 1, L in [2, 1e5]", r, ("VERIFIED", "PROVED"))
    r = attnbounds.check("alpha_i >= exp(-2*a/T)/L", normaliser=SSMAX, fixed=fixed, ranges=ranges, budget=BUDGET,
                         **LEMMA1)
    show("SSMax: the same bound", r, ("REFUTED",))
    if r.verdict == "REFUTED":
        cx = r.counterexample
        print(f"   certified counterexample at L = {cx['L']} (SSMax's weights fall below softmax's floor once "
              f"s log L > 1, i.e. L > e^(1/s) = {math.exp(1 / S):.1f})")
        print("   " + r.cite().splitlines()[0][:400])

    # 3. softpick has no log F: searched in float64, never certified
    r = attnbounds.assert_bound("alpha_i <= 1", normaliser=softpick, ranges={"L": [1, 4096]}, budget=BUDGET)
    show("softpick: alpha_i <= 1 (assert_bound passes)", r, ("VERIFIED",))
    try:
        attnbounds.assert_bound("alpha_i*L >= exp(-2*a/T)", normaliser=softpick, budget=BUDGET, **LEMMA1)
        problems.append("softpick: the Lemma-1-style floor was expected to fail")
    except AssertionError as exc:
        print("\n== softpick: alpha_i L >= exp(-2a/T) (assert_bound raises)")
        print("   " + str(exc).replace("\n", "\n   ")[:1500])

    print("\nsummary: " + ("every verdict as expected" if not problems else "; ".join(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
