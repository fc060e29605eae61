"""A toy language model with a tiny vocabulary, for exact checks of speculative sampling."""
from __future__ import annotations

import numpy as np
import torch


class BigramLM(torch.nn.Module):
    """Next-token law depends on the previous token only: ``P(x_t = b | x_{t-1} = a) = table[a, b]``.

    Called as ``model(ids [1, n]) -> logits [1, n, V]`` (no KV cache; :class:`~spinlib.sd.engine.CachedLM`
    re-scores the prefix, which is exact for such a model).
    """

    def __init__(self, table):
        super().__init__()
        t = np.asarray(table, dtype=float)
        if t.ndim != 2 or t.shape[0] != t.shape[1] or np.any(t < 0) or not np.allclose(t.sum(1), 1):
            raise ValueError("table must be a square row-stochastic matrix")
        self.table = t
        self.logp = torch.log(torch.as_tensor(t, dtype=torch.float64))

    def forward(self, ids):
        return self.logp[ids]

    @classmethod
    def random(cls, vocab: int, rng: np.random.Generator, concentration: float = 0.7) -> "BigramLM":
        return cls(rng.dirichlet(np.ones(vocab) * concentration, vocab))

    def two_token_law(self, first: int) -> np.ndarray:
        """Exact ``P(x_1 = a, x_2 = b | x_0 = first)`` as a flat ``[V*V]`` vector."""
        return (self.table[first][:, None] * self.table).ravel()
