"""Input and output: statement files and their self-check, records and their schema, serialisation, the HTML
report, prose and the paper's index, atomic files, terminal text, stored counterexamples, the cache folder.

Imports from ``mathematics`` and ``deciding``, never from ``running``.
"""
