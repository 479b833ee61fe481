"""Non-negative least squares, min ||A x - b|| subject to x >= 0 (Lawson and Hanson, "Solving Least
Squares Problems", 1974, chapter 23, algorithm NNLS), numpy only. Deterministic: ties in the
active-set choice go to the lowest index."""
from __future__ import annotations

import numpy as np


def nnls(A: np.ndarray, b: np.ndarray, max_iterations: int | None = None, tolerance: float = 1e-12) -> np.ndarray:
    """The x >= 0 minimising ||A x - b|| (Lawson-Hanson active set, module docstring); at most
    `max_iterations` outer rounds (default 3n + 30).
    """
    A = np.asarray(A, dtype=float)
    b = np.asarray(b, dtype=float)
    m, n = A.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    limit = max_iterations or 3 * n + 30
    scale = tolerance * max(1.0, float(np.abs(A).max(initial=0.0)) * float(np.abs(b).max(initial=0.0)))
    for _ in range(limit):
        gradient = A.T @ (b - A @ x)
        candidates = np.where(~passive & (gradient > scale))[0]
        if len(candidates) == 0:
            break
        passive[candidates[np.argmax(gradient[candidates])]] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(A[:, passive], b, rcond=None)[0]
            if np.all(z[passive] > 0):
                x = z
                break
            blocking = passive & (z <= 0)
            steps = x[blocking] / np.maximum(x[blocking] - z[blocking], 1e-300)
            alpha = float(np.min(steps))
            x = x + alpha * (z - x)
            passive &= x > tolerance
            x[~passive] = 0.0
    return x
