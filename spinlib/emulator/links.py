"""Radio transfers of a trace: how long each round's uplink and downlink take on that round's channel."""
from __future__ import annotations

import numpy as np

from ..channel import RateModel, downlink_rate
from ..rounds import Allocation
from ..scenario import Scenario
from .traces import Trace, uplink_mask


def transfer_times(scenario: Scenario, alloc: Allocation, trace: Trace, h: np.ndarray, bandwidth_hz=None):
    """Uplink and downlink times [s] of every round and user, each of shape ``[R, K]``.

    ``up_rk = bits_up_rk / R_k(b_k; a_k h_rk)``: the scenario's rate model with this round's SNR
    scale ``a_k h_rk`` (the linear model's efficiency at the equal share is recomputed from the
    faded SNR). Downlink (DL-mode allocations only): ``bits_down_rk / r_k(p_k; h_rk)``
    (:func:`spinlib.channel.downlink_rate`, shared by the drafting DL devices) plus the device's
    correction time ``t_corr`` when a distribution came down (variant "reject") or every round
    it drafts (variant "all"). Zero bits take zero time.

    Parameters
    ----------
    h : float array, shape [R, K]
        Power-gain factors of the rounds (:meth:`spinlib.emulator.fading.Fading.draw`).
    bandwidth_hz : float array, shape [K] or [R, K], optional
        Uplink bandwidth [Hz] of every round and user, replacing ``alloc.b`` (a controller that
        re-plans each round, :mod:`spinlib.online.multiuser`); ``None``: ``alloc.b`` in every round.
    """
    b = alloc.b if bandwidth_hz is None else np.asarray(bandwidth_hz, dtype=float)
    R_up = RateModel.faded(scenario, h).rate(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(trace.bits_up > 0, trace.bits_up / R_up, 0.0)
    down = np.zeros_like(up)
    corr = np.zeros_like(up)
    if alloc.modes is not None:
        ul = uplink_mask(scenario, alloc)
        n_dl = int(np.count_nonzero(~ul & (alloc.L > 0)))
        r_dl = downlink_rate(scenario, np.array(alloc.dl_power_w), n_dl, fading=h)
        with np.errstate(divide="ignore", invalid="ignore"):
            down = np.where(trace.bits_down > 0, trace.bits_down / r_dl, 0.0)
        if scenario.downlink.variant == "reject":
            corr = np.where(trace.bits_down > 0, scenario.downlink.correction_time_s, 0.0)
        else:
            corr = np.where(~ul[None, :] & (trace.drafted > 0), scenario.downlink.correction_time_s, 0.0)
    return up, down + corr


__all__ = ["transfer_times"]
