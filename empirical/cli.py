"""``attnbounds empirical``: the paper's experiments on a GPT-2-family model (a thin layer over ``run``).

Exit codes: 0 done, 2 bad input or a model/text that cannot be had (the message says how to fix it).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

from attnbounds.theory.mathematics.errors import AttnBoundsError

EPILOG = """\
examples:
  attnbounds empirical --model standin --out results/       # 8 x 8 heads, trained here once (15-30 min), cached
  attnbounds empirical --model tiny --quick --out quick/    # 4 x 4 heads (~5 min once): fast, barely learned
  attnbounds empirical --model gpt2 --out gpt2/ --scheduler processes:2   # GPT-2 small from the Hugging Face cache
  attnbounds empirical --model /path/to/gpt2 --text war-and-peace.txt --out out/

text: --text PATH, else $ATTNBOUNDS_TEXT, else the cached download, else Project Gutenberg ebook 2600
(a UTF-8 text file of at most 64 MiB). A model trained here reads only the held-out tokens after its training split.
cache: $ATTNBOUNDS_CACHE (default ~/.cache/attnbounds) holds the trained models, token ids and the text.
"""


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _names(text: str) -> tuple[str, ...]:
    return () if text.strip() == "none" else tuple(v.strip() for v in text.split(",") if v.strip())


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


#: CLI option -> Protocol field, for the options that override the protocol
OVERRIDES = {
    "experiments": "experiments", "windows": "windows", "window_start": "window_start",
    "window_align": "window_align", "window_lengths": "window_lengths", "nulls": "nulls",
    "null_windows": "null_windows", "check_positions": "check_positions",
    "batch_windows": "batch_windows", "queries": "queries", "masked_keys": "masked_keys", "L_grid": "L_grid",
    "N_grid": "N_grid", "N_fixed": "N_fixed", "x_tensor": "distance_tensor", "sep_tensor": "separability_tensor",
    "expectation": "expectation", "expected_mc_draws": "expected_mc_draws", "ks_alpha": "ks_alpha",
    "critical_reading": "critical_reading", "critical_max_frac": "critical_max_frac",
    "separability_L": "separability_L", "separability_N": "separability_N", "M": "M",
    "hoeffding_constant": "hoeffding_constant", "gradient_L": "gradient_L", "gradient_logits": "gradient_logits",
    "T_grid": "T_grid", "eps_grid": "eps_grid", "seed": "seed",
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="attnbounds empirical", description=__doc__.splitlines()[0],
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="gpt2", help="'standin' (8 x 8 heads, trained here), 'tiny' (4 x 4, for tests), "
                   "a hub name (gpt2, gpt2-medium, distilgpt2) or a folder")
    p.add_argument("--out", required=True, help="output folder (figures, report.md, report.html, results.json)")
    p.add_argument("--text", default=None, help="plain-text file (default: $ATTNBOUNDS_TEXT, cache, Gutenberg 2600)")
    p.add_argument("--quick", action="store_true", help="the same protocol on fewer windows, lengths and N")
    p.add_argument("--device", default=None, help="where the forward passes run: auto (cuda when torch sees a GPU, "
                   "else cpu; the default), cpu, cuda or cuda:K")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    p.add_argument("--scheduler", default=None,
                   help="where batches of windows run: none (this process), processes:N (N local worker processes) "
                        "or tcp://HOST:PORT (a Dask scheduler); default $ATTNBOUNDS_SCHEDULER, else none. "
                        "The numbers do not depend on it")
    g = p.add_argument_group("protocol (defaults: the full or --quick protocol)")
    g.add_argument("--experiments", type=lambda s: tuple(s.split(",")), help="subset of distance,critical,separability,gradients")
    g.add_argument("--windows", type=int, help="number of non-overlapping windows")
    g.add_argument("--window-start", type=int, help="first token of the first window, from the start of the region")
    g.add_argument("--window-align", choices=("auto", "chapters", "consecutive"),
                   help="windows at chapter starts (auto: when the text has chapter headings) or consecutive")
    g.add_argument("--window-lengths", choices=("prefixes", "new"),
                   help="shorter lengths read prefixes of the same windows (default) or new windows")
    g.add_argument("--nulls", type=_names, help="comma-separated nulls among random-init,shuffled,uniform, or none")
    g.add_argument("--null-windows", type=int, help="windows the nulls run on (the first ones)")
    g.add_argument("--check-positions", type=int, help="query positions per layer re-checked against theory")
    g.add_argument("--batch-windows", type=int, help="windows per forward pass")
    g.add_argument("--queries", help="'all' (every query position, the paper's; default), 'last' (query L-1) or 'tail:Q'")
    g.add_argument("--masked-keys", choices=("drop", "zero"),
                   help="causally masked keys: dropped (query t has t+1 keys) or kept with weight 0")
    g.add_argument("--L-grid", dest="L_grid", type=_ints, help="lengths for Fig. 2a (e.g. 32,64,...,1024)")
    g.add_argument("--N-grid", dest="N_grid", type=_ints, help="top-N values for Fig. 2b")
    g.add_argument("--N-fixed", dest="N_fixed", type=int, help="top-N for Fig. 2a (paper: 5)")
    g.add_argument("--x-tensor", choices=("values", "keys", "queries"), help="x_i for the distance experiments")
    g.add_argument("--sep-tensor", choices=("values", "keys", "queries"), help="x_i for separability")
    g.add_argument("--expectation", help="Theorem 1 expectation term used by the KS test (J_scaled_weighted, ...)")
    g.add_argument("--expected-mc-draws", type=int, help="> 0: also E[dtilde] over random N-subsets (slow)")
    g.add_argument("--ks-alpha", type=float, help="KS significance level (paper: 0.01)")
    g.add_argument("--critical-reading", choices=("R1", "R2"), help="dtilde reading of the KS test")
    g.add_argument("--critical-max-frac", type=float, help="largest N/L scanned for the critical N")
    g.add_argument("--separability-L", dest="separability_L", type=int, help="L for Fig. 3")
    g.add_argument("--separability-N", dest="separability_N", type=_ints, help="top-N values for Fig. 3")
    g.add_argument("--M", dest="M", type=float, help="sphere radius (Assumption 1)")
    g.add_argument("--hoeffding-constant", type=float, help="constant of Theorem 2's upper bound (printed: 16)")
    g.add_argument("--gradient-L", dest="gradient_L", type=int, help="L for Fig. 4")
    g.add_argument("--gradient-logits", choices=("raw", "scaled"), help="logits fed to softmax(l/T)")
    g.add_argument("--T-grid", dest="T_grid", type=_floats, help="temperatures for Fig. 4")
    g.add_argument("--eps-grid", type=_floats, help="perturbation sizes for Fig. 4 (paper: 1e-3,1e-1,10)")
    g.add_argument("--seed", type=int, help="seed of every random choice")
    return p


def protocol_from_args(args: argparse.Namespace) -> Any:
    from attnbounds.empirical.config import Protocol

    overrides = {field: getattr(args, opt) for opt, field in OVERRIDES.items() if getattr(args, opt) is not None}
    base = Protocol.quick() if args.quick else Protocol.full()
    return replace(base, **overrides).validated()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``attnbounds empirical``: parse ``argv``, run, print where the outputs are."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        from attnbounds.empirical.cachedir import cache_dir
        from attnbounds.empirical.pipeline import run

        cache_dir()  # an unusable $ATTNBOUNDS_CACHE is bad input: say so before anything loads or trains
        proto = protocol_from_args(args)
        results = run(args.model, args.out, text=args.text, protocol=proto, progress=not args.no_progress,
                      figures=not args.no_figures, scheduler=args.scheduler, device=args.device)
    except AttnBoundsError as exc:
        print(f"attnbounds empirical: error: {exc}", file=sys.stderr)
        return 2
    from attnbounds.empirical.report import model_line

    print(f"wrote {args.out}/report.md, report.html, results.json and {len(results['outputs']['figures'])} figures")
    print(model_line(results).replace("**", ""))
    for row in results["headlines"]:
        nulls = ", ".join(f"{n} {'passes' if r['passed'] else 'fails' if r['passed'] is False else 'n/a'}"
                          for n, r in row["nulls"].items())
        print(f"  [{row['verdict']}] {row['claim']} (paper: {row['paper']}): {row['measured']}"
              + (f" [nulls: {nulls}]" if nulls else ""))
    return 0
