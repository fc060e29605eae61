"""The papers' own models, settings, algorithms and baselines, as written (beside our model in the rest of spinlib).

* :mod:`.multispin` -- paper 1, Multi-SPIN (arXiv 2606.04581): per-device verification, linear rate,
  retained-vocabulary upload, zero-padded batch; Lemmas 1 and 3, Theorem 1, Proposition 1, Algorithm 1 and
  the Fixed BW&L, Uni-BW, Homo-Multi-SPIN and P2P-SPIN baselines;
* :mod:`.uplink_downlink` -- paper 2, Uplink or Downlink? (arXiv 2608.29618): the reactive protocol, Lemma 1,
  Lemma 2 / Proposition 1, Algorithm 1 and the mode and length baselines;
* :mod:`.gelato` -- GELATO (arXiv 2605.10124): one device, the FLOP-counted drafter, top-p uploads, the energy
  queue and the entropy early exit of Algorithm 1, and static SD, with our choices for the unstated constants;
* :mod:`.settings` -- the papers' published settings (tables and sections cited) and cell generators, and
  UCB-SpecStop's Theorem 5 with its Tables I, IV and V.

Every round model here adds its phases with :mod:`spinlib.roundcost`.
"""
