"""The paper's symbols, shared by every statement module (names as in the paper)."""

import sympy as sp

L, N, T, a, r, M, delta, eps, p, H = sp.symbols("L N T a r M delta eps p H", positive=True)
C_1, C_2, C_H, kappa = sp.symbols("C_1 C_2 C_H kappa", positive=True)
alpha_i, abar_N, d_1, dtilde, max_norm = sp.symbols("alpha_i abar_N d_1 dtilde max_norm", nonnegative=True)
Delta = sp.Symbol("Delta", nonnegative=True)
E_dtilde, J, eps_bound, A, m = sp.symbols("E_dtilde J eps_bound A m", nonnegative=True)
E_Ns = sp.Symbol("E_Ns", nonnegative=True)
xi = sp.IndexedBase("xi")
i = sp.Idx("i")
jac, g_fd = sp.symbols("J_norm g", nonnegative=True)
dF_max, F_l2, dF_l2, alpha_min, alpha_max, g_absmax = sp.symbols(
    "dF_max F_l2 dF_l2 alpha_min alpha_max g_absmax", nonnegative=True)
coverage = sp.Symbol("coverage", nonnegative=True)
