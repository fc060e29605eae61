"""Vectorised root finding for monotone functions (many independent 1-D problems at once).

``scipy.optimize.brentq`` solves one scalar problem; the solvers here need thousands at once
(one per candidate draft-length vector, one per user). :func:`newton_decreasing` is Newton's
method safeguarded by bisection, applied elementwise to a batch.
"""
from __future__ import annotations

import numpy as np


def newton_decreasing(fdf, lo, hi, x0=None, *, tol: float = 1e-13, f_tol: float = 1e-10, max_iter: int = 60,
                      live=None, rows: bool = False):
    """Safeguarded Newton for decreasing ``f`` on brackets ``[lo, hi]`` (batched).

    ``fdf(x) -> (f, df)``. A Newton step that leaves the current bracket is replaced by the
    midpoint, and every evaluation shrinks the bracket, so the iteration cannot diverge; near
    the root it converges quadratically. Bisection steps halve the bracket, so ``max_iter`` = 60
    suffices for brackets up to ~1e3 wide in the iteration variable (the solvers iterate in log
    space, on brackets of width <= 100). ``live`` masks the entries that need iterating: the loop
    stops when they have converged (the others are iterated along, and their results mean nothing).

    ``rows=True``: ``fdf(x, idx)`` evaluates only the entries ``idx`` (flat indices into the batch) at
    ``x`` (1-D), and each iteration evaluates only the live entries that have not converged. Where
    ``fdf`` gives an entry the same value whatever else is in the batch (the caller's duty: e.g. sums
    over C-ordered rows), each live entry's iterates are those of the default mode bit for bit (an
    entry's iteration depends on itself only; a converged entry stays where it is in both). The
    entries that are not live are left at ``x0`` and their bracket (the default mode iterates them
    too), and a converged entry's bracket is the one it converged in.

    Returns
    -------
    x, lo, hi : ndarray
        The last iterate and the final bracket.
    """
    lo = np.array(lo, dtype=float, copy=True)
    hi = np.array(hi, dtype=float, copy=True)
    x = 0.5 * (lo + hi) if x0 is None else np.clip(np.asarray(x0, dtype=float), lo, hi)
    live = np.ones(x.shape, dtype=bool) if live is None else np.broadcast_to(live, x.shape)
    if rows:
        return _newton_rows(fdf, lo, hi, x, live, tol, f_tol, max_iter)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for _ in range(max_iter):
            x, lo, hi, conv = _step(x, *fdf(x), lo, hi, tol, f_tol)
            if not (live & ~conv).any():
                break
    return x, lo, hi


def _step(x, f, df, lo, hi, tol, f_tol):
    """One safeguarded Newton step of every entry given: the new iterate, the shrunk bracket and
    whether the entry has converged (the one step both modes of :func:`newton_decreasing` take)."""
    pos = f > 0
    lo = np.where(pos, x, lo)
    hi = np.where(pos, hi, x)
    step = f / df
    x_new = x - step
    bad = ~np.isfinite(x_new) | (x_new <= lo) | (x_new >= hi)
    x_new = np.where(bad, 0.5 * (lo + hi), x_new)
    # converged: a tiny Newton step where f is tiny too, or a collapsed bracket; a
    # converged entry stays where it is (else a step landing on the bracket end would bisect)
    scale = tol * (1.0 + np.abs(x))
    conv = ((np.abs(step) <= scale) & (np.abs(f) <= f_tol)) | (hi - lo <= scale) | (f == 0)
    return np.where(conv, x, x_new), lo, hi, conv


def _newton_rows(fdf, lo, hi, x, live, tol, f_tol, max_iter):
    """:func:`newton_decreasing` evaluating only the entries still iterating (``rows=True``)."""
    shape = x.shape
    x, lo, hi = x.reshape(-1).copy(), lo.reshape(-1).copy(), hi.reshape(-1).copy()
    todo = np.flatnonzero(np.broadcast_to(live, shape).reshape(-1))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for _ in range(max_iter):
            if not todo.size:
                break
            xs = x[todo]
            x[todo], lo[todo], hi[todo], conv = _step(xs, *fdf(xs, todo), lo[todo], hi[todo], tol, f_tol)
            todo = todo[~conv]
    return x.reshape(shape), lo.reshape(shape), hi.reshape(shape)
