"""The protocol: every choice the paper leaves open, as a parameter recorded in the output.

``Protocol.full()`` mirrors section 3 / appendix B of arXiv:2508.17821 where the paper is
explicit (every query position of the causal attention matrix, averaged per head; N = 5 over
L = 32..1024; L = 1024 over N in {1, 5, 10, 20, 100}; KS alpha 0.01; eps in {1e-3, 1e-1, 10})
and fixes the rest; ``Protocol.quick()`` is a reduced run (the same protocol on 4 windows of at
most 128 tokens and fewer N). Every headline is also measured on nulls (``empirical.nulls``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from attnbounds.empirical.rows import QuerySpec
from attnbounds.empirical.windows import ALIGNMENTS
from attnbounds.theory.mathematics.errors import AttnBoundsError

TENSORS = ("values", "keys", "queries")
WINDOW_LENGTHS = ("prefixes", "new")
NULLS = ("random-init", "shuffled", "uniform")
EXPECTATIONS = ("J_scaled_weighted", "J_scaled_mean", "J_printed_weighted", "J_printed_mean")
EXPERIMENTS = ("distance", "critical", "separability", "gradients")


def _log_grid(lo: float, hi: float, n: int) -> tuple[float, ...]:
    return tuple(float(f"{10 ** (math.log10(lo) + k * (math.log10(hi) - math.log10(lo)) / (n - 1)):.6g}")
                 for k in range(n))


@dataclass(frozen=True)
class Protocol:
    """All parameters of one run (see the module docstring; each field is written to results.json)."""

    name: str = "full"
    experiments: tuple[str, ...] = EXPERIMENTS
    # windows (paper: "consecutive chapters"; count/start not stated)
    windows: int = 32
    window_start: int = 0
    window_align: str = "auto"  # "auto" (chapters when the text has headings), "chapters", "consecutive"
    window_lengths: str = "prefixes"  # "prefixes": shorter L are prefixes of the same windows; "new": new windows per L
    batch_windows: int = 2
    queries: str = "all"  # "all" (the paper's), "last" or "tail:Q" (rows.QuerySpec)
    masked_keys: str = "drop"  # "drop" or "zero"
    # nulls (empirical.nulls): each headline criterion is also run on them, on the first null_windows windows
    nulls: tuple[str, ...] = NULLS
    null_windows: int = 4
    # rows per layer record re-checked against the theory quantities (empirical.checks)
    check_positions: int = 2
    check_every: int = 8
    # experiment 1: distances (Fig. 2a/b)
    L_grid: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)
    N_fixed: int = 5
    N_grid: tuple[int, ...] = (1, 5, 10, 20, 100)
    distance_tensor: str = "values"
    distance_sphere: bool = False
    expectation: str = "J_scaled_weighted"  # which Theorem 1 expectation term the KS test uses
    expected_mc_draws: int = 0  # > 0: also E[dtilde] over random N-subsets (theory's estimator)
    # experiment 2: critical top-N (Fig. 2c)
    ks_alpha: float = 0.01
    critical_reading: str = "R1"
    critical_max_frac: float = 0.5
    critical_dense_upto: int = 8  # every N up to 8, then steps of 20 % up to max_frac L (31 values at L = 1024)
    critical_step: float = 1.2
    # experiment 3: separability (Fig. 3)
    separability_L: int = 1024
    separability_N: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    separability_tensor: str = "values"
    separability_sphere: bool = True
    M: float = 1.0
    hoeffding_constant: float = 16.0
    multihead_H: int = 3
    multihead_N: int = 16
    multihead_groups: int = 20
    # experiment 4: gradients (Fig. 4)
    gradient_L: int = 1024
    gradient_logits: str = "raw"  # "raw" (l = q.k, T = sqrt(d_head) is the model's own) or "scaled"
    T_grid: tuple[float, ...] = field(default_factory=lambda: _log_grid(1e-3, 1e2, 21))
    eps_grid: tuple[float, ...] = (1e-3, 1e-1, 10.0)
    seed: int = 0

    @classmethod
    def full(cls, **overrides: Any) -> "Protocol":
        return replace(cls(), **overrides).validated()

    @classmethod
    def quick(cls, **overrides: Any) -> "Protocol":
        base = cls(name="quick", windows=4, L_grid=(32, 64, 128), N_grid=(1, 5, 20, 50),
                   critical_step=1.25, critical_dense_upto=8, separability_L=128,
                   separability_N=(1, 4, 16, 64), gradient_L=128, T_grid=_log_grid(1e-3, 1e2, 11),
                   multihead_groups=5, null_windows=2, check_positions=1)
        return replace(base, **overrides).validated()

    @property
    def max_L(self) -> int:
        return max(self.lengths)

    @property
    def lengths(self) -> tuple[int, ...]:
        """Every window length an experiment reads, ascending."""
        Ls = set(self.L_grid) if {"distance", "critical"} & set(self.experiments) else set()
        Ls |= {self.separability_L} if "separability" in self.experiments else set()
        Ls |= {self.gradient_L} if "gradients" in self.experiments else set()
        return tuple(sorted(Ls))

    def critical_N_grid(self, L: int) -> tuple[int, ...]:
        """N scanned for the critical top-N at length L: every N up to ``critical_dense_upto``, then geometric."""
        top = max(1, min(L - 1, int(math.ceil(self.critical_max_frac * L))))
        grid = list(range(1, min(top, self.critical_dense_upto) + 1))
        n = float(grid[-1])
        while grid[-1] < top:
            n *= self.critical_step
            grid.append(min(top, max(grid[-1] + 1, int(round(n)))))
        return tuple(grid)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def validated(self) -> "Protocol":
        """Self, after checking every field; raises AttnBoundsError naming the bad value."""
        def bad(name: str, value: Any, allowed: str) -> AttnBoundsError:
            return AttnBoundsError(f"{name} must be {allowed}, got {name}={value!r}")

        for name in self.experiments:
            if name not in EXPERIMENTS:
                raise bad("experiments", name, f"among {', '.join(EXPERIMENTS)}")
        if not self.experiments:
            raise bad("experiments", self.experiments, "a non-empty list")
        for name in ("windows", "batch_windows", "N_fixed", "multihead_H", "multihead_N", "multihead_groups",
                     "critical_dense_upto", "null_windows", "check_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise bad(name, value, "an integer >= 1")
        if not isinstance(self.window_start, int) or self.window_start < 0:
            raise bad("window_start", self.window_start, "an integer >= 0")
        if not isinstance(self.check_positions, int) or isinstance(self.check_positions, bool) or self.check_positions < 0:
            raise bad("check_positions", self.check_positions, "an integer >= 0")
        if self.window_align not in ALIGNMENTS:
            raise bad("window_align", self.window_align, f"one of {', '.join(ALIGNMENTS)}")
        if self.window_lengths not in WINDOW_LENGTHS:
            raise bad("window_lengths", self.window_lengths, f"one of {', '.join(WINDOW_LENGTHS)}")
        for name in self.nulls:
            if name not in NULLS:
                raise bad("nulls", name, f"among {', '.join(NULLS)}")
        if not isinstance(self.expected_mc_draws, int) or self.expected_mc_draws < 0:
            raise bad("expected_mc_draws", self.expected_mc_draws, "an integer >= 0")
        for name in ("L_grid", "N_grid", "separability_N"):
            grid = getattr(self, name)
            if not grid or any(not isinstance(v, int) or v < 1 for v in grid):
                raise bad(name, grid, "a non-empty list of integers >= 1")
        if min(self.L_grid) < 2:
            raise bad("L_grid", self.L_grid, "lengths >= 2")
        for name in ("separability_L", "gradient_L"):
            if getattr(self, name) < 2:
                raise bad(name, getattr(self, name), "an integer >= 2")
        if self.N_fixed >= min(self.L_grid):
            raise bad("N_fixed", self.N_fixed, f"smaller than every L in L_grid (min {min(self.L_grid)})")
        if not 0.0 < self.ks_alpha < 1.0:
            raise bad("ks_alpha", self.ks_alpha, "a significance level in (0, 1)")
        if not 0.0 < self.critical_max_frac < 1.0:
            raise bad("critical_max_frac", self.critical_max_frac, "a fraction in (0, 1)")
        if not self.critical_step > 1.0:
            raise bad("critical_step", self.critical_step, "a growth factor > 1")
        for name in ("distance_tensor", "separability_tensor"):
            if getattr(self, name) not in TENSORS:
                raise bad(name, getattr(self, name), f"one of {', '.join(TENSORS)}")
        if self.expectation not in EXPECTATIONS:
            raise bad("expectation", self.expectation, f"one of {', '.join(EXPECTATIONS)}")
        if self.critical_reading not in ("R1", "R2"):
            raise bad("critical_reading", self.critical_reading, "R1 or R2")
        if self.gradient_logits not in ("raw", "scaled"):
            raise bad("gradient_logits", self.gradient_logits, "raw or scaled")
        if self.masked_keys not in ("drop", "zero"):
            raise bad("masked_keys", self.masked_keys, "drop or zero")
        for name in ("T_grid", "eps_grid"):
            grid = getattr(self, name)
            if not grid or any(not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0) for v in grid):
                raise bad(name, grid, "a non-empty list of finite numbers > 0")
        for name in ("M", "hoeffding_constant"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise bad(name, getattr(self, name), "a finite number > 0")
        QuerySpec.parse(self.queries, self.masked_keys)
        return self
