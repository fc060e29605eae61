"""The device's energy per round (GELATO, arXiv 2605.10124; our model, controllers.md "Chosen").

    E(L) = L e_d + p_tx L S / R + p_idle (t0 + t1 (L + 1) + D)     [J]

``e_d`` [J/token] is the energy of drafting one token (device power times its draft time),
``p_tx`` [W] the transmit power during the upload of ``L S`` bits at rate ``R`` [bit/s], and
``p_idle`` [W] what the device draws while it waits for verification and the delay.

Presets from public nominal figures (ours to choose, not measurements): a phone SoC drawing
about 3 W while running a small model, and an NVIDIA Jetson Orin Nano in its 7 W power mode;
``p_tx = 0.2 W`` is the 23 dBm maximum output of a 3GPP power-class-3 handset; idle power
0.3 W for both. ``e_d = P_device t_d`` is formed with the scenario's draft time ``t_d``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..registry import Registry
from ..scenario import Scenario
from ..validation import ValidationError, check_nonnegative


@dataclass(frozen=True)
class EnergyModel:
    """``E(L) = L e_d + p_tx L S / R + p_idle (t0 + t1 (L + 1) + D)`` (module docstring).

    Parameters
    ----------
    draft_j_per_token : float
        ``e_d`` [J/token], >= 0.
    tx_power_w : float
        ``p_tx`` [W], >= 0.
    idle_power_w : float
        ``p_idle`` [W], >= 0.
    """

    draft_j_per_token: float
    tx_power_w: float = 0.2
    idle_power_w: float = 0.0

    def __post_init__(self) -> None:
        for name in ("draft_j_per_token", "tx_power_w", "idle_power_w"):
            check_nonnegative(name, getattr(self, name))

    def round_energy(self, L, upload_s, wait_s):
        """``E`` [J] of rounds drafting ``L`` tokens, uploading for ``upload_s`` and waiting ``wait_s`` [s]."""
        return (np.asarray(L, float) * self.draft_j_per_token + self.tx_power_w * np.asarray(upload_s, float)
                + self.idle_power_w * np.asarray(wait_s, float))


@dataclass(frozen=True)
class EnergyPreset:
    """A device's nominal powers [W] while drafting, transmitting and idle, with their ``source``."""

    name: str
    device_power_w: float
    tx_power_w: float
    idle_power_w: float
    source: str
    family: str = "nominal"

    @property
    def description(self) -> str:
        return self.source

    @property
    def params(self) -> dict:
        return {}


ENERGY_PRESETS: Registry[EnergyPreset] = Registry("energy preset", ("nominal", "measured"), forbidden=":,=")


def register_energy_preset(preset: EnergyPreset, replace: bool = False) -> EnergyPreset:
    """Add a device energy preset: one entry, no edit inside the library (an equal one may register again)."""
    for name in ("device_power_w", "tx_power_w", "idle_power_w"):
        check_nonnegative(name, getattr(preset, name))
    return ENERGY_PRESETS.register(preset, replace=replace)


register_energy_preset(EnergyPreset("phone-soc", 3.0, 0.2, 0.3,
                                    "phone SoC ~3 W under a small-model load (nominal); 23 dBm class-3 uplink"))
register_energy_preset(EnergyPreset("orin-nano-7w", 7.0, 0.2, 0.3,
                                    "NVIDIA Jetson Orin Nano 7 W power mode (nominal); 23 dBm class-3 uplink"))


def energy_preset(name: str, t_d: float) -> EnergyModel:
    """The :data:`ENERGY_PRESETS` entry ``name`` with ``e_d = P_device t_d`` [J/token]."""
    if name not in ENERGY_PRESETS:
        raise ValidationError(f"energy preset must be one of {sorted(ENERGY_PRESETS)}, got {name!r}")
    p = ENERGY_PRESETS[name]
    return EnergyModel(p.device_power_w * float(t_d), p.tx_power_w, p.idle_power_w)


def device_energy(scenario: Scenario, preset: str = "phone-soc") -> tuple[EnergyModel, ...]:
    """One :class:`~spinlib.online.energy.EnergyModel` per device: ``e_k = P_device tau_k`` and
    ``p_idle`` from :data:`~spinlib.online.energy.ENERGY_PRESETS` ``[preset]``, transmit power the
    scenario's ``P_k`` (the power behind the rate model; the presets' 0.2 W is the same 23 dBm)."""
    if preset not in ENERGY_PRESETS:
        raise ValidationError(f"energy_preset must be one of {sorted(ENERGY_PRESETS)}, got {preset!r}")
    ep = ENERGY_PRESETS[preset]
    return tuple(EnergyModel(ep.device_power_w * float(t), float(p), ep.idle_power_w)
                 for t, p in zip(scenario.tau, scenario.power))


@dataclass(frozen=True)
class DeviceEnergies:
    """The ``K`` devices' :class:`EnergyModel` behind one :meth:`round_energy` over arrays ``[K]``: the
    ``env.energy`` of a per-user controller that plays a cell's ``K`` devices at once
    (:func:`spinlib.online.replan.cell_user_env`)."""

    models: tuple

    def round_energy(self, L, upload_s, wait_s):
        """``E_k`` [J] of every device, with the users on the *first* axis as a per-user controller holds
        them (``[K]`` or ``[K, ...]``, e.g. ``[K, L_max]`` candidates; a leading axis of 1 broadcasts)."""
        L, up, wait = (np.asarray(x, float) for x in (L, upload_s, wait_s))
        nd = max(L.ndim, up.ndim, wait.ndim, 1)
        e, p_tx, p_idle = (a.reshape((-1,) + (1,) * (nd - 1)) for a in _energy_arrays(self.models))
        return L * e + p_tx * up + p_idle * wait


def _energy_arrays(models: Sequence[EnergyModel]):
    """``(e [K] J/token, p_tx [K] W, p_idle [K] W)``."""
    return (np.array([m.draft_j_per_token for m in models]), np.array([m.tx_power_w for m in models]),
            np.array([m.idle_power_w for m in models]))


def round_energy(models: Sequence[EnergyModel], L, upload_s, wait_s) -> np.ndarray:
    """``E_k = L_k e_k + p_tx,k up_k + p_idle,k wait_k`` [J], shape ``[..., K]``
    (:meth:`EnergyModel.round_energy` of every device)."""
    e, p_tx, p_idle = _energy_arrays(models)
    return (np.asarray(L, float) * e + p_tx * np.asarray(upload_s, float) + p_idle * np.asarray(wait_s, float))


__all__ = ["EnergyModel", "DeviceEnergies", "EnergyPreset", "ENERGY_PRESETS", "register_energy_preset", "energy_preset", "device_energy", "round_energy"]
