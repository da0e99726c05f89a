"""Every search ``verify`` runs follows :class:`~attnbounds.theory.deciding.search.Search` (issue 32): the real search
and the tests' stand-ins (``tests/_fakesearch.py``) take the protocol's keywords and return a
:class:`~attnbounds.theory.deciding.search.SearchResult` of single instances, interior ones when asked."""

from __future__ import annotations

import inspect
import time

import numpy as np
import pytest

from attnbounds.theory.deciding.boundary import interior
from attnbounds.theory.deciding.parallel import Runner
from attnbounds.theory.deciding.search import Search, SearchResult, search
from attnbounds.theory.mathematics import normalisers as nm
from attnbounds.theory.mathematics import registry
from attnbounds.theory.mathematics.instance import Instance
from tests._fakesearch import random_search, scripted

#: the protocol's parameters after ``self``
PROTOCOL = list(inspect.signature(Search.__call__).parameters.values())[1:]
#: one candidate on a boundary of the hypotheses (L = 1), one inside them
ON_BOUNDARY = Instance.from_logits(np.array([[0.0]]), nm.softmax(1.0))
INSIDE = Instance.from_logits(np.array([[0.0, 5.0, 1.0]]), nm.softmax(1.0))
SEARCHES: dict[str, Search] = {"search": search, "random_search": random_search,
                               "scripted": scripted([ON_BOUNDARY, INSIDE], best=INSIDE)}


@pytest.mark.parametrize("name", SEARCHES)
def test_a_search_takes_the_protocols_keywords(name: str) -> None:
    params = inspect.signature(SEARCHES[name]).parameters
    first, *rest = params.values()
    assert first.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD  # the statement
    for p in PROTOCOL[1:]:
        assert p.name in params, f"{name} lacks the keyword {p.name!r}"
        mine = params[p.name]
        assert mine.kind is inspect.Parameter.KEYWORD_ONLY
        assert p.default is inspect.Parameter.empty or mine.default == p.default, (name, p.name, mine.default)
    extra = [q.name for q in rest if q.name not in {p.name for p in PROTOCOL}]
    assert all(params[q].default is not inspect.Parameter.empty for q in extra), extra  # its own knobs are optional


@pytest.mark.parametrize("name", SEARCHES)
@pytest.mark.parametrize("inside", [False, True])
def test_a_search_returns_single_instances_interior_ones_when_asked(name: str, inside: bool) -> None:
    st = registry.get("multihead")
    res = SEARCHES[name](st, budget_s=0.05, seed=1, progress=False, interior=inside, runner=Runner(),
                         deadline=time.time() + 60)
    assert isinstance(res, SearchResult) and res.statement_id == st.id and res.seed == 1
    assert res.tried > 0 and all(isinstance(info, dict) for info in res.by_method.values())
    for one in [*res.violations, *([res.best] if res.best is not None else [])]:
        assert isinstance(one, Instance) and one.B == 1
    if inside:
        assert all(bool(interior(v, st.reads_selection)[0]) for v in res.violations)
    elif name == "scripted":
        assert res.violations == [ON_BOUNDARY, INSIDE]
