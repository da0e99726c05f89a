"""Each experiment against an independent, straightforward computation on a tiny random GPT-2.

The reference side uses only ``output_attentions``/``output_hidden_states`` of transformers and
plain numpy loops over windows, heads and every query position, so it shares no code with empirical/
extraction, rows, kernels, accumulation or the theory quantities.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy.stats import ks_2samp

from _gpt2 import collect_on
from attnbounds.empirical.config import Protocol

PROTO = Protocol.full(name="test", windows=3, batch_windows=2, L_grid=(8, 16, 32), N_fixed=3, N_grid=(1, 3, 6),
                      critical_dense_upto=4, critical_step=1.5, critical_max_frac=0.5,
                      separability_L=32, separability_N=(1, 2, 4, 8), multihead_N=4, gradient_L=32,
                      T_grid=(0.01, 0.1, 1.0, 10.0), nulls=())
H, LAYERS, E = 2, 2, 32


@pytest.fixture(scope="module")
def run(rand_model: torch.nn.Module) -> tuple[dict, dict]:
    ids = np.random.default_rng(5).integers(0, 50257, size=PROTO.windows * PROTO.max_L + 7)
    results = collect_on(rand_model, ids, PROTO)["model"]
    wins = ids[: PROTO.windows * PROTO.max_L].reshape(PROTO.windows, PROTO.max_L)
    return results, reference_tensors(rand_model, wins)


def reference_tensors(model: torch.nn.Module, wins: np.ndarray) -> dict[str, np.ndarray]:
    """Attention (W, layer, H, L, L), raw logits and values (W, layer, H, L, dh), float64."""
    with torch.inference_mode():
        out = model(input_ids=torch.as_tensor(wins), output_attentions=True, output_hidden_states=True)
    att = np.stack([a.double().numpy() for a in out.attentions], axis=1)
    vals, logits = [], []
    for layer, block in enumerate(model.transformer.h):
        with torch.inference_mode():
            qkv = block.attn.c_attn(block.ln_1(out.hidden_states[layer]))
        q, k, v = (t.reshape(wins.shape[0], wins.shape[1], H, E // H).permute(0, 2, 1, 3).double().numpy()
                   for t in qkv.split(E, dim=-1))
        vals.append(v)
        logits.append(q @ k.transpose(0, 1, 3, 2))
    return {"att": att, "v": np.stack(vals, 1), "logits": np.stack(logits, 1)}


def rows_of(ref: dict, L: int, last_only: bool = False) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
    """(window, global head, alpha of query t over its t + 1 keys, values) for every window, layer, head and
    query position t >= 1 of a window of L tokens (only t = L - 1 with ``last_only``)."""
    out = []
    for w in range(ref["att"].shape[0]):
        for layer in range(LAYERS):
            for h in range(H):
                for t in ([L - 1] if last_only else range(1, L)):
                    a = ref["att"][w, layer, h, t, : t + 1]
                    out.append((w, layer * H + h, a / a.sum(), ref["v"][w, layer, h, : t + 1]))
    return out


def top(a: np.ndarray, N: int) -> np.ndarray:
    return np.argsort(-a, kind="stable")[:N]


def per_head(values: list[tuple[int, float]]) -> np.ndarray:
    acc = np.zeros(LAYERS * H)
    cnt = np.zeros(LAYERS * H)
    for h, v in values:
        acc[h] += v
        cnt[h] += 1
    return acc / cnt


def distances(a: np.ndarray, x: np.ndarray, N: int) -> dict[str, float]:
    L = len(a)
    sel = top(a, N)
    out_ = [i for i in range(L) if i not in set(sel)]
    s = sum(a[j] * x[j] for j in sel)
    abar = a[sel].sum()
    rho = N / (L - 1)
    m = sum(a[j] * x[j] for j in range(L))
    d1 = max(np.linalg.norm(x[i] - x[j]) for i in out_ for j in sel)
    maxn = max(np.linalg.norm(x[j]) for j in sel)
    return {
        "dtilde_R1": sum(np.linalg.norm(a[i] * x[i] - s) for i in out_),
        "dtilde_R2": np.linalg.norm(sum(a[i] * x[i] for i in out_) - s),
        "J_scaled_weighted": (L - N) / L * sum(np.linalg.norm(a[i] * (1 + rho) * x[i] - rho * m) for i in range(L)),
        "J_printed_mean": (L - N) / L * sum(np.linalg.norm((a[i] + rho) * x[i] - x.mean(0)) for i in range(L)),
        "theorem1.fixed[R1,g1]": (1 - abar) * d1 + maxn * (abar * (L - N) - (1 - abar)),
        "theorem1.fixed[R1,g2]": (1 - abar) * d1 + maxn * abar * (L - N) - (1 - abar),
    }


def separability_reference(a: np.ndarray, x: np.ndarray, N: int) -> dict[str, object]:
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    L = len(a)
    delta = min(np.linalg.norm(x[i] - x[j]) for i in range(L) for j in range(i + 1, L))
    sel = list(top(a, N))
    s = sum(a[j] * x[j] for j in sel)
    dist = [np.linalg.norm(a[i] * x[i] - s) for i in range(L)]
    r = min(dist[i] for i in range(L) if i not in sel)
    inside = [i for i in sel if dist[i] <= r]
    xi = []
    for i in sel:
        others = [a[j] for j in sel if j != i]
        P, Q = sum(others), sum(o * o for o in others)
        xi.append(math.sqrt(max(P * P - delta**2 / 2 * (P * P - Q), 0.0)))
    lower = 1 - sum(xi) / (r * N)
    upper = sum(math.exp(-((r - v) ** 2) / 16.0) for v in xi) / N
    return {"Ns_frac": len(inside) / N, "lower": lower, "upper": upper, "r": r, "delta": delta,
            "inside": set(inside), "sel": set(sel)}


def test_distance_matches_loops(run: tuple[dict, dict]) -> None:
    results, ref = run
    pairs = {(r["L"], r["N"]): r for r in results["distance"]["pairs"]}
    assert set(pairs) == {(8, 3), (16, 3), (32, 3), (32, 1), (32, 6)}
    for (L, N), rec in pairs.items():
        rows = [(h, distances(a, x, N)) for _, h, a, x in rows_of(ref, L) if len(a) > N]
        assert rec["rows_per_head"].tolist() == [PROTO.windows * (L - N)] * (LAYERS * H)  # every query with an N-split
        for name in rows[0][1]:
            expect = per_head([(h, d[name]) for h, d in rows])
            np.testing.assert_allclose(rec["per_head"][name], expect, rtol=1e-5, err_msg=f"{name} L={L} N={N}")


def test_critical_n_matches_ks_scan(run: tuple[dict, dict]) -> None:
    results, ref = run
    crit = results["critical"]
    assert crit["ks_resolution"]["heads_per_sample"] == LAYERS * H
    for rec in crit["per_L"]:
        L = rec["L"]
        assert rec["N"] == list(PROTO.critical_N_grid(L)) and rec["ceiling"] == rec["N"][-1]
        found = None
        for k, N in enumerate(rec["N"]):
            rows = [(h, distances(a, x, N)) for _, h, a, x in rows_of(ref, L) if len(a) > N]
            true = per_head([(h, d["dtilde_R1"]) for h, d in rows])
            expected = per_head([(h, d["J_scaled_weighted"]) for h, d in rows])
            p = ks_2samp(true, expected).pvalue
            assert rec["scans"]["J_scaled_weighted"]["p_value"][k] == pytest.approx(p, rel=1e-6)
            if found is None and p > PROTO.ks_alpha:
                found = N
        scan = rec["scans"]["J_scaled_weighted"]
        assert scan["critical_N"] == found
        assert scan["status"] == ("not found" if found is None else "at the scan ceiling" if found == rec["ceiling"]
                                  else "found")


def test_separability_matches_loops(run: tuple[dict, dict]) -> None:
    results, ref = run
    sep = results["separability"]
    L = PROTO.separability_L
    for rec in sep["per_N"]:
        N = rec["N"]
        rows = [(h, separability_reference(a, x, N)) for _, h, a, x in rows_of(ref, L) if len(a) > N]
        for name in ("Ns_frac", "lower", "upper", "r", "delta"):
            np.testing.assert_allclose(rec["per_head"][name], per_head([(h, d[name]) for h, d in rows]),
                                       rtol=1e-6, atol=1e-9, err_msg=f"{name} N={N}")
        assert np.all(rec["per_head"]["Ns_full_frac"] == 0)  # the paper's r puts a non-selected token on the ball


def test_multihead_coverage_matches_loops(run: tuple[dict, dict]) -> None:
    results, ref = run
    mh = results["separability"]["multihead"]
    assert mh["H"] == 2 and mh["groups"] == [[0, 1]]
    L, N = PROTO.separability_L, PROTO.multihead_N
    cov = []
    for w in range(PROTO.windows):
        for layer in range(LAYERS):
            for t in range(N, L):  # every query with more than N keys
                per = []
                for h in range(H):
                    a = ref["att"][w, layer, h, t, : t + 1]
                    per.append(separability_reference(a / a.sum(), ref["v"][w, layer, h, : t + 1], N))
                for g in itertools.combinations(range(H), 2):
                    cov.append(len(set().union(*(per[h]["inside"] for h in g)))
                               / len(set().union(*(per[h]["sel"] for h in g))))
    assert mh["coverage_observed"] == pytest.approx(np.mean(cov)) and mh["coverage_samples"] == len(cov)
    p = mh["p_observed"]
    assert mh["coverage_predicted_independent"] == pytest.approx(1 - (1 - p) ** 2)
    assert mh["paper_example"]["coverage"] == pytest.approx(1 - 0.2**3)


def test_gradients_match_loops(run: tuple[dict, dict]) -> None:
    results, ref = run
    grad = results["gradients"]
    L = PROTO.gradient_L
    T, eps = np.asarray(PROTO.T_grid), np.asarray(PROTO.eps_grid)
    vals: dict[tuple[int, int], list[tuple[int, float]]] = {}

    def sm(z: np.ndarray) -> np.ndarray:
        z = z - z.max()
        return np.exp(z) / np.exp(z).sum()

    for layer in range(LAYERS):
        for w in range(PROTO.windows):  # one Gaussian draw per (layer, window, L), whatever the batches
            u = np.random.default_rng([PROTO.seed, layer, w, L]).standard_normal((H, L))
            for h in range(H):
                for t in range(1, L):
                    v = u[h, : t + 1] / np.linalg.norm(u[h, : t + 1])
                    lg = ref["logits"][w, layer, h, t, : t + 1]
                    for i, te in enumerate(T):
                        for j, e in enumerate(eps):
                            g = np.linalg.norm(sm((lg + e * v) / te) - sm(lg / te)) / e
                            vals.setdefault((i, j), []).append((layer * H + h, g))
    for (i, j), rows in vals.items():
        np.testing.assert_allclose(np.asarray(grad["per_head"])[i, j], per_head(rows), rtol=1e-6, atol=1e-12)
        assert np.asarray(grad["max_over_heads"])[i, j] == pytest.approx(per_head(rows).max(), rel=1e-6)
    printed = np.asarray(grad["envelopes"]["corollary3[fd]"])
    proved = np.asarray(grad["envelopes"]["corollary3[fd,corrected]"])
    np.testing.assert_allclose(printed, np.minimum(1 / (4 * T), math.sqrt(2))[:, None] * np.ones((1, eps.size)))
    np.testing.assert_allclose(proved, np.minimum(1 / (2 * T)[:, None], math.sqrt(2) / eps[None, :]))
    # the proved envelope holds on every instance (mean value theorem); the printed one need not
    assert grad["statements"]["corollary3[fd,corrected]"]["violated"] == 0
    assert grad["own_temperature"]["values"] == [pytest.approx(math.sqrt(E // H))]  # raw q.k: T = sqrt(d_head)


def test_statements_evaluated_on_every_row(run: tuple[dict, dict]) -> None:
    results, _ = run
    Ns, Lmax = sorted({r["N"] for r in results["distance"]["pairs"]}), max(PROTO.L_grid)
    n_rows = PROTO.windows * LAYERS * H * sum(Lmax - N for N in Ns)  # each (row, N) once, whatever L it counts for
    for sid, t in results["distance"]["statements"].items():
        assert t["instances"] == n_rows, sid
    for sid in ("theorem1.fixed[R1,g1]", "theorem1.fixed[R1,g2,corrected]"):
        assert results["distance"]["statements"][sid]["violated"] == 0  # proved bounds hold on real rows


def test_kernels_agree_with_theory_on_the_sampled_rows(run: tuple[dict, dict]) -> None:
    results, _ = run
    for name in ("distance", "critical", "separability", "gradients"):
        checks = results[name]["checks"]
        assert checks["numbers_checked"] > 0 and checks["worst"] < 1e-9, (name, checks["max_relative_deviation"])
        assert not any(checks["not_applicable"].values()), name


def test_last_query_protocol_reads_one_row_per_window(rand_model: torch.nn.Module) -> None:
    from dataclasses import replace

    proto = replace(PROTO, queries="last", experiments=("distance",))
    ids = np.random.default_rng(5).integers(0, 50257, size=PROTO.windows * PROTO.max_L + 7)
    res = collect_on(rand_model, ids, proto)["model"]["distance"]
    wins = ids[: PROTO.windows * PROTO.max_L].reshape(PROTO.windows, PROTO.max_L)
    ref = reference_tensors(rand_model, wins)
    for rec in res["pairs"]:
        assert rec["rows_per_head"].tolist() == [PROTO.windows] * (LAYERS * H)
        rows = [(h, distances(a, x, rec["N"])) for _, h, a, x in rows_of(ref, rec["L"], last_only=True)]
        np.testing.assert_allclose(rec["per_head"]["dtilde_R1"], per_head([(h, d["dtilde_R1"]) for h, d in rows]),
                                   rtol=1e-5)


def test_query_plans() -> None:
    """Which rows (t, l) a record gives each window length, for every query mode and masking."""
    from attnbounds.empirical.rows import QuerySpec, plan
    from attnbounds.theory.mathematics.errors import InvalidArgument

    allq = plan(QuerySpec.parse("all"), [4, 8], 8, prefixes=True)
    assert list(allq) == [(t, t + 1) for t in range(1, 8)]
    assert allq[(2, 3)] == [4, 8] and allq[(5, 6)] == [8]
    assert plan(QuerySpec.parse("last"), [4, 8], 8, prefixes=True) == {(3, 4): [4], (7, 8): [8]}
    assert plan(QuerySpec.parse("tail:2"), [4], 8, prefixes=True) == {(2, 3): [4], (3, 4): [4]}
    assert plan(QuerySpec.parse("tail:2", "zero"), [4], 8, prefixes=True) == {(2, 4): [4], (3, 4): [4]}
    assert plan(QuerySpec.parse("all"), [4, 8], 8, prefixes=False) == {(t, t + 1): [8] for t in range(1, 8)}
    assert QuerySpec.parse("all").describe().startswith("every query position")
    with pytest.raises(InvalidArgument, match="queries must be"):
        QuerySpec.parse("first")


def test_zero_masking_keeps_masked_keys_with_weight_zero(rand_model: torch.nn.Module) -> None:
    from attnbounds.empirical.extract import Extractor
    from attnbounds.empirical.rows import RecordRows

    recs: list = []
    with Extractor(rand_model, recs.append) as ex:
        ex.run(np.arange(2 * 16).reshape(2, 16))
    rr = RecordRows(recs[0])
    drop, zero = rr.weights(9, 10), rr.weights(9, 12)
    assert drop.shape == (2 * H, 10) and zero.shape == (2 * H, 12) and np.all(zero[:, 10:] == 0)
    np.testing.assert_allclose(zero[:, :10], drop, rtol=0)
    np.testing.assert_allclose(np.linalg.norm(rr.x("keys", sphere=True, M=2.0), axis=-1), 2.0)


def test_random_subset_expectation_optional(rand_model: torch.nn.Module) -> None:
    """--expected-mc-draws adds theory's E[dtilde] over random N-subsets and the Theorem 1 (random) readings."""
    from dataclasses import replace

    proto = replace(PROTO, experiments=("distance",), windows=1, L_grid=(8, 16), N_grid=(1, 3), expected_mc_draws=16,
                    separability_L=16, gradient_L=16)
    ids = np.random.default_rng(2).integers(0, 50257, size=64)
    res = collect_on(rand_model, ids, proto)
    dist = res["model"]["distance"]
    rec = next(r for r in dist["pairs"] if (r["L"], r["N"]) == (8, 3))
    assert np.all(np.isfinite(rec["per_head"]["E_dtilde_R1"]))  # C(l, 3) subsets: exact enumeration
    assert any(sid.startswith("theorem1.random[R1,") for sid in dist["statements"])
    assert set(res["model"]) == {"distance"}
