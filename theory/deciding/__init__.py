"""How a statement is decided: the counterexample search, certification in interval arithmetic, the limit
analysis, boundary and margin analysis, closed claims, the relaxation prover, and the runner their pieces are
mapped on (in-process or a Dask cluster).

Imports from ``mathematics`` only, never from ``io`` or ``running``.
"""
