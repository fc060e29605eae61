"""The one registry class: model pairs, scenario presets and device energy presets are registered like
policies and controllers (one entry, no edit inside the library), read like mappings, and refuse a
clash, a malformed name or a bad value with one line."""
import dataclasses

import pytest

from spinlib.online.energy import ENERGY_PRESETS, EnergyPreset, energy_preset, register_energy_preset
from spinlib.presets import PRESETS, get_preset, random_scenario, register_preset
from spinlib.registry import Registry
from spinlib.sd.models import PAIRS, Pair, get_pair, pair_label, register_pair
from spinlib.validation import ValidationError


def test_a_new_pair_is_one_entry():
    pair = Pair("smollm2-rtn5-test", "smollm2-135m-instruct", 5, 16)
    try:
        assert register_pair(pair) is pair and get_pair("smollm2-rtn5-test") is pair
        assert "smollm2-rtn5-test" in PAIRS and PAIRS["smollm2-rtn5-test"].family == "low-bit-draft"
        assert pair_label("smollm2-rtn5-test") == "SmolLM2-135M + RTN-5 (g16) draft"
        register_pair(Pair("smollm2-rtn5-test", "smollm2-135m-instruct", 5, 16))  # an equal entry: a re-run cell
        with pytest.raises(ValidationError, match="already registered"):
            register_pair(Pair("smollm2-rtn5-test", "smollm2-135m-instruct", 3, 16))
        register_pair(Pair("smollm2-rtn5-test", "smollm2-135m-instruct", 3, 16), replace=True)
        assert get_pair("smollm2-rtn5-test").draft_bits == 3
    finally:
        PAIRS.remove("smollm2-rtn5-test")
    for bad, msg in ((Pair("a:b", "smollm2-135m-instruct", 4), "pair name"),
                     (Pair("no-such-model", "gpt-99", 4), "not a packaged model")):
        with pytest.raises(ValidationError, match=msg):
            register_pair(bad)
    with pytest.raises(ValidationError, match="pair must be one of"):
        get_pair("smollm2-rtn5-test")


def test_a_new_preset_is_one_entry():
    base = get_preset("llama2-7b-l4")
    mine = dataclasses.replace(base, name="llama2-7b-l4-wide", bandwidth_hz=40e6)
    try:
        register_preset(mine)
        s = random_scenario(3, 1, preset="llama2-7b-l4-wide")
        assert s.radio.bandwidth_hz == 40e6 and PRESETS["llama2-7b-l4-wide"].family == "roofline"
        with pytest.raises(ValidationError, match="already registered"):
            register_preset(dataclasses.replace(mine, bandwidth_hz=5e6))
    finally:
        PRESETS.remove("llama2-7b-l4-wide")
    with pytest.raises(ValidationError, match="measured preset"):
        register_preset(dataclasses.replace(base, name="qwen-coder-measured"))
    with pytest.raises(ValidationError, match="preset must be one of"):
        get_preset("llama2-7b-l4-wide")


def test_a_new_energy_preset_is_one_entry():
    try:
        register_energy_preset(EnergyPreset("laptop-15w", 15.0, 0.2, 1.0, "a laptop at 15 W (nominal)"))
        assert energy_preset("laptop-15w", 0.01).draft_j_per_token == pytest.approx(0.15)
    finally:
        ENERGY_PRESETS.remove("laptop-15w")
    with pytest.raises(ValidationError, match="idle_power_w"):
        register_energy_preset(EnergyPreset("bad", 1.0, 0.2, -1.0, "negative idle power"))
    with pytest.raises(ValidationError, match="family"):
        register_energy_preset(EnergyPreset("bad", 1.0, 0.2, 0.1, "x", family="guessed"))


def test_a_registry_reads_like_a_mapping():
    r = Registry("thing", ("a",))
    e = EnergyPreset("x", 1.0, 0.0, 0.0, "x", family="a")
    r.register(e)
    assert list(r) == ["x"] and len(r) == 1 and "x" in r and "y" not in r
    assert r["x"] is e and dict(r.items()) == {"x": e} and list(r.keys()) == ["x"] and list(r.values()) == [e]
    with pytest.raises(ValidationError, match="thing must be one of"):
        r["y"]
