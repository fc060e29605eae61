"""One certified search: a best-first branch-and-bound engine with node and time budgets.

Every certified optimiser of the library (the heterogeneous models A and B, UL/DL mode selection)
is an instance of one loop; a problem supplies only what is its own:

* ``evaluate(X)`` -- the exact objective of candidate rows ``X`` [n, ...] (larger is better);
* ``root(inc)`` -- the root partition, a dict of equal-length arrays (one row per node);
* ``expand(nodes, inc)`` -- tighten and bound new nodes (it may enumerate small ones exactly and
  offer candidates to the incumbent ``inc``); returns the bounded nodes with their valid upper
  bounds in key ``"ub"``, the largest bound of what it closed itself, and how many nodes it bounded;
* ``split(nodes, inc)`` -- the children of the nodes chosen for branching (a dict of the same keys).

The engine keeps the incumbent, discards every node whose bound is ``<= value (1 + gap)``, splits
the ``batch`` best-bounded open nodes together (one vectorised pass), and stops when no node is open
(status "optimal"), at the node budget ("node_limit") or at the wall-clock safety limit
("time_limit"). Its certificate is frozen: ``upper_bound = max(value, bounds of every closed or open
node)`` is a valid bound on the optimum whenever the problem's bounds are valid and every point of
the search space lies in a node that was enumerated, discarded with its bound, or is still open --
the one invariant each problem's docstring argues.

Where the search space is small, evaluating every point is cheaper than setting the tree up:
:func:`exhaustive` evaluates all of them (in chunks) and certifies the best with a zero gap. The
solvers dispatch to it up to :data:`EXHAUSTIVE_MAX_VECTORS` length vectors (the crossover measured in
``benchmarks/certified_scaling.py``, tiny-K rows); ``Certificate.method`` says which search ran.

``Certificate.status`` follows a MIP solver's convention: "optimal" only when the achieved relative
gap is within the solver's optimality tolerance, "gap_limit" when every node closed at a looser
requested tolerance, "node_limit" / "time_limit" when a budget stopped the search.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from ..validation import ValidationError, check_int_range, check_nonnegative


def check_gap(gap) -> float:
    """The requested relative gap tolerance as a float in [0, 1) (one line otherwise: a gap of 1 or more
    certifies any point, so it would make the search do nothing)."""
    gap = check_nonnegative("gap", gap)
    if gap >= 1:
        raise ValidationError(f"gap must be in [0, 1) (a relative tolerance), got {gap!r}")
    return gap


def certified_status(status: str, gap: float, optimal_gap: float) -> str:
    """The status a solver reports: ``"optimal"`` only when the achieved relative ``gap`` is within the
    solver's optimality tolerance ``optimal_gap`` (its default); a search that closed every node at a
    looser requested tolerance reports ``"gap_limit"`` (like a MIP solver's gap stop), never "optimal".
    ``"node_limit"`` and ``"time_limit"`` pass through."""
    return "gap_limit" if status == "optimal" and gap > optimal_gap else status


def relative_gap(value: float, upper_bound: float) -> float:
    """``(upper_bound - value) / upper_bound`` (0 when the bound is not positive)."""
    return (upper_bound - value) / upper_bound if upper_bound > 0 else 0.0


@dataclass(frozen=True)
class Certificate:
    """What a certified search proved.

    upper_bound : a valid upper bound on the optimum (same unit as the objective).
    gap : ``(upper_bound - value) / upper_bound`` of the returned point.
    status : "optimal", "gap_limit", "node_limit" or "time_limit" (module docstring).
    nodes : nodes bounded (0 for an exhaustive search).
    time_s : wall-clock time of the search [s].
    method : "branch-and-bound" or "exhaustive" (every point evaluated).
    """

    upper_bound: float
    gap: float
    status: str
    nodes: int
    time_s: float
    method: str = "branch-and-bound"

    def info_for(self, value: float, optimal_gap: float) -> dict:
        """The ``info`` keys every certified allocation reports for its point of exact ``value``: the
        bound (never below the value), the relative gap, the nodes, the time and the status
        (:func:`certified_status` against the solver's optimality tolerance ``optimal_gap``) and the
        search that ran (``"search"``: :attr:`method`)."""
        ub = max(self.upper_bound, value)
        gap = relative_gap(value, ub)
        return {"upper_bound": ub, "gap": gap, "bnb_nodes": self.nodes, "bnb_time_s": self.time_s,
                "status": certified_status(self.status, gap, optimal_gap), "search": self.method}


@dataclass(frozen=True)
class SearchResult:
    """The best point found (``x``, its exact ``value``) and the :class:`Certificate` of the search."""

    x: np.ndarray
    value: float
    certificate: Certificate

    @property
    def upper_bound(self) -> float:
        return self.certificate.upper_bound

    @property
    def status(self) -> str:
        return self.certificate.status

    @property
    def nodes(self) -> int:
        return self.certificate.nodes

    @property
    def time_s(self) -> float:
        return self.certificate.time_s


@dataclass
class Incumbent:
    """The best point so far; ``offer`` evaluates candidate rows exactly and keeps the best.

    ``threshold`` is the value a node's bound must exceed to stay open: ``value (1 + gap)``.
    """

    x: np.ndarray
    value: float
    evaluate: Callable[[np.ndarray], np.ndarray]
    gap: float = 0.0
    offered: int = field(default=0)
    prune: Callable[[float, float], float] | None = None

    def offer(self, X) -> np.ndarray:
        """Exact values of the candidate rows ``X`` (the incumbent moves to the best if it improves)."""
        X = np.asarray(X)
        if len(X) == 0:
            return np.zeros(0)
        return self.consider(X, self.evaluate(X))

    def consider(self, X, values) -> np.ndarray:
        """As :meth:`offer` with the exact ``values`` of ``X`` already computed (by a problem whose
        evaluation yields more than the value)."""
        values = np.asarray(values, dtype=float).reshape(-1)
        if len(values) == 0:
            return values
        self.offered += len(values)
        i = int(np.argmax(values))
        if values[i] > self.value:
            self.x, self.value = np.asarray(X)[i].copy(), float(values[i])
        return values

    @property
    def threshold(self) -> float:
        """``value (1 + gap)`` by default; a problem whose objective can be negative passes its own rule."""
        return self.value * (1 + self.gap) if self.prune is None else self.prune(self.value, self.gap)


class NodeSearch(Protocol):
    """What a problem supplies to :func:`best_first` (module docstring)."""

    def evaluate(self, X: np.ndarray) -> np.ndarray: ...

    def root(self, inc: Incumbent) -> dict[str, np.ndarray]: ...

    def expand(self, nodes: dict[str, np.ndarray], inc: Incumbent) -> tuple[dict[str, np.ndarray], float, int]: ...

    def split(self, nodes: dict[str, np.ndarray], inc: Incumbent) -> dict[str, np.ndarray]: ...


def _rows(nodes: dict[str, np.ndarray], mask) -> dict[str, np.ndarray]:
    return {k: v[mask] for k, v in nodes.items()}


def _size(nodes: dict[str, np.ndarray] | None) -> int:
    return len(nodes["ub"]) if nodes and "ub" in nodes else (len(next(iter(nodes.values()))) if nodes else 0)


def best_first(problem: NodeSearch, x0, value0: float, *, gap: float = 1e-9, time_limit_s: float = 10.0,
               max_nodes: int | None = None, batch: int = 64, outside_bound: float = -np.inf,
               prune: Callable[[float, float], float] | None = None) -> SearchResult:
    """Best-first branch-and-bound of ``problem`` from the incumbent ``(x0, value0)``.

    Parameters
    ----------
    gap : relative tolerance: nodes whose bound is ``<= value (1 + gap)`` are discarded.
    time_limit_s : wall-clock safety limit [s]; checked after each expansion (the root is always
        bounded); on expiry the open nodes' bounds enter the upper bound.
    max_nodes : node budget (``None``: none); reproducible on any machine, unlike the clock.
    batch : open nodes split per vectorised pass (the best-bounded ones; ties broken by age).
    outside_bound : a bound proven apart for the points the tree does not hold (their optimum is
        ``<= outside_bound``); it enters the certificate's upper bound.
    prune : ``prune(value, gap) -> threshold`` -- a node stays open while its bound exceeds it
        (default ``value (1 + gap)``; an objective that can be negative needs an absolute scale).

    Returns
    -------
    SearchResult
        ``value >= value0`` and ``certificate.upper_bound >= `` the optimum (module docstring).
    """
    t_start = time.perf_counter()
    inc = Incumbent(np.asarray(x0).copy(), float(value0), problem.evaluate, gap, prune=prune)
    closed = max(inc.value, outside_bound)  # largest bound of every node closed so far (enumerated, cut or discarded)
    nodes = 0
    status = "optimal"
    new = problem.root(inc)
    open_: dict[str, np.ndarray] | None = None
    while True:
        if new and _size(new):
            bounded, closed_here, counted = problem.expand(new, inc)
            nodes += counted
            closed = max(closed, closed_here)
            if bounded and len(bounded["ub"]):
                live = bounded["ub"] > inc.threshold
                closed = max(closed, float(np.max(bounded["ub"][~live], initial=-np.inf)))
                kept = _rows(bounded, live)
                open_ = kept if open_ is None else {k: np.concatenate([open_[k], kept[k]]) for k in open_}
        if open_ is None or len(open_["ub"]) == 0:
            break
        keep = open_["ub"] > inc.threshold
        if not keep.all():
            closed = max(closed, float(np.max(open_["ub"][~keep])))
            open_ = _rows(open_, keep)
        if len(open_["ub"]) == 0:
            break
        if max_nodes is not None and nodes >= max_nodes:
            status = "node_limit"
            break
        if time.perf_counter() - t_start > time_limit_s:
            status = "time_limit"
            break
        take = np.argsort(-open_["ub"], kind="stable")[:batch]
        rest = np.ones(len(open_["ub"]), dtype=bool)
        rest[take] = False
        chosen = _rows(open_, take)
        open_ = _rows(open_, rest)
        new = problem.split(chosen, inc)
    remaining = float(np.max(open_["ub"], initial=-np.inf)) if open_ is not None else -np.inf
    ub = max(inc.value, closed, remaining)
    cert = Certificate(ub, relative_gap(inc.value, ub), status, nodes, time.perf_counter() - t_start)
    return SearchResult(inc.x, inc.value, cert)


EXHAUSTIVE_MAX_VECTORS = 5_000
"""Largest search space (length vectors) the certified solvers enumerate instead of branching: at
K = 2 or 3 users every vector costs about 10 us to evaluate, a branch-and-bound 40-80 ms to set up
(``benchmarks/certified_scaling.py`` records both, side by side)."""


def few_vectors(K: int, L_max: int, limit: int) -> bool:
    """``(L_max+1)^K <= limit`` without forming the power (K can be 100,000)."""
    n = 1
    for _ in range(int(K)):
        n *= L_max + 1
        if n > limit:
            return False
    return True


def length_vectors(K: int, L_max: int) -> np.ndarray:
    """``[(L_max+1)^K, K]``: every draft-length vector, in lexicographic order."""
    return np.array(list(itertools.product(range(L_max + 1), repeat=K)), dtype=int).reshape(-1, K)


def check_exhaustive_max(value) -> int:
    """The solvers' ``exhaustive_max`` (largest search space they enumerate) as an int in
    [0, 10^7] (one line otherwise; 0 always branches)."""
    return check_int_range("exhaustive_max", value, 0, 10**7)


def exhaustive_if_small(evaluate: Callable[[np.ndarray], np.ndarray], K: int, L_max: int,
                        exhaustive_max: int) -> SearchResult | None:
    """The dispatch of every certified solver: :func:`exhaustive` over all of ``{0..L_max}^K`` when it has
    at most ``exhaustive_max`` vectors (validated by :func:`check_exhaustive_max`), else ``None`` (the
    caller branches)."""
    if not few_vectors(K, L_max, check_exhaustive_max(exhaustive_max)):
        return None
    return exhaustive(evaluate, length_vectors(K, L_max))


def exhaustive(evaluate: Callable[[np.ndarray], np.ndarray], points: np.ndarray, chunk: int = 20_000) -> SearchResult:
    """The best of ``points`` [n, ...] by their exact values (``evaluate``, in chunks): the optimum of the
    space they cover, certified with a zero gap (``upper_bound = value``, status "optimal", method
    "exhaustive"). The first of equal values wins."""
    t_start = time.perf_counter()
    best_x, best_v = None, -np.inf
    for start in range(0, len(points), chunk):
        X = points[start:start + chunk]
        v = np.asarray(evaluate(X), dtype=float).reshape(-1)
        i = int(np.argmax(v))
        if best_x is None or v[i] > best_v:
            best_x, best_v = X[i].copy(), float(v[i])
    if best_x is None:
        raise ValueError("exhaustive search over no points")
    cert = Certificate(best_v, 0.0, "optimal", 0, time.perf_counter() - t_start, "exhaustive")
    return SearchResult(best_x, best_v, cert)


__all__ = ["EXHAUSTIVE_MAX_VECTORS", "check_exhaustive_max", "exhaustive_if_small", "few_vectors", "length_vectors", "exhaustive", "Certificate", "SearchResult", "Incumbent", "NodeSearch", "best_first", "check_gap",
           "certified_status", "relative_gap"]
