"""Search power at small L: planted mutants of proved readings (their bound scaled by 0.97 is false where it is
attained, by 1.03 it is true), killed in the false direction only. The long-context set is in
``test_long_contexts.py``; ``bench/mutants.py`` measures the kill rate over every proved reading."""

from attnbounds.theory.mathematics import registry
from attnbounds.theory.deciding.margins import REAL
from attnbounds.theory.deciding.search import search
from tests.planted import scaled


def test_planted_mutants_are_killed_in_the_false_direction_only():
    st = registry.get("corollary3[entry,corrected]")  # attained with equality at L = 2, equal logits
    tight = search(scaled(st, 0.97), budget_s=1.0, seed=0)
    loose = search(scaled(st, 1.03), budget_s=1.0, seed=0)
    assert tight.violations and tight.violation_margins[0] < -0.01
    assert not [r for r in loose.violation_margins if r < -REAL]
