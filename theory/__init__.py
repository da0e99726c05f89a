"""attnbounds' theory: the paper's statements, their quantities, and how a verdict is reached.

The modules stand in four wings; a module imports only from its own wing and the wings below it (function-local
imports and ``if TYPE_CHECKING:`` ones included; ``tests/unit/test_imports.py`` walks the sources and checks it),
and the import graph has no circle, not even at the type level:

1. **mathematics** (``attnbounds.theory.mathematics``): instances, normalisers, intervals and balls, the quantities
   with all their backends, the hypotheses, statements and their registry, the expression parser and notation
   (a mathematical object parses and prints itself), input checks and the memory budget. It imports nothing from
   the wings above.
2. **deciding** (``.deciding``): the search, certification, the limit analysis, boundary and margin analysis, closed claims, the
   relaxation prover, and the runner their pieces are mapped on (in-process or Dask).
3. **input and output** (``.io``): statement files and self-check, records and their schema, serialisation, the HTML
   report, prose and the paper's index, atomic files, terminal text, stored counterexamples, the cache folder.
4. **running** (``.running``): ``verify`` (one verdict ladder), the public API, the CLI.
"""

#: the wings, bottom up: each is a sub-package (``attnbounds.theory.<wing>``)
WINGS: tuple[str, ...] = ("mathematics", "deciding", "io", "running")
