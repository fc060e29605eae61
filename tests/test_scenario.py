"""Validation at construction (one clear error per bad field), JSON round trip, generator."""
import json

import numpy as np
import pytest

from spinlib import Payload, Radio, Scenario, Server, User, ValidationError, random_scenario
from spinlib.presets import PRESETS, roofline_server

GOOD_USER = dict(draft_time_s=0.01, alpha=0.7, channel_gain=1e-12, tx_power_w=0.2)


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("draft_time_s", 0.0, r"draft_time_s must be in \["),
        ("draft_time_s", -1.0, r"draft_time_s must be in \["),
        ("draft_time_s", float("nan"), r"draft_time_s must be finite"),
        ("alpha", 1.0, r"alpha must be in \[0, 1\)"),
        ("alpha", -0.1, r"alpha must be in \[0, 1\)"),
        ("alpha", "0.5", r"alpha must be a real number"),
        ("channel_gain", 0.0, r"channel_gain must be in \["),
        ("tx_power_w", -0.2, r"tx_power_w must be in \["),
        ("acceptance_profile", (0.5, 0.7), r"non-increasing"),
        ("acceptance_profile", (1.5,), r"\[0, 1\]"),
    ],
)
def test_user_validation(field, value, match):
    with pytest.raises(ValidationError, match=match):
        User(**{**GOOD_USER, field: value})


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(bandwidth_hz=-1e6), r"bandwidth_hz must be in \["),
        (dict(bandwidth_hz=0), r"bandwidth_hz must be in \["),
        (dict(bandwidth_hz=1e6, noise_psd_w_per_hz=0), r"noise_psd_w_per_hz must be in \["),
        (dict(bandwidth_hz=1e6, rate_model="cubic"), r"rate_model must be 'shannon' or 'linear'"),
        (dict(bandwidth_hz=1e6, access_latency_s=-0.01), r"access_latency_s must be in \["),
        (dict(bandwidth_hz=1e6, downlink_rate_bps=0), r"downlink_rate_bps must be in \["),
    ],
)
def test_radio_validation(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        Radio(**kwargs)


def test_server_and_payload_validation():
    with pytest.raises(ValidationError, match=r"t0_s must be in \["):
        Server(t0_s=-1, t1_s_per_token=0)
    with pytest.raises(ValidationError, match=r"t1_s_per_token must be in \["):
        Server(t0_s=0.01, t1_s_per_token=-1e-4)
    with pytest.raises(ValidationError, match=r"vocab_size must be an integer in \[2, 2147483647\]"):
        Payload(vocab_size=1)
    with pytest.raises(ValidationError, match=r"mode must be one of"):
        Payload(vocab_size=100, mode="zip")
    with pytest.raises(ValidationError, match=r"top_k must be an integer in \[1, 100\]"):
        Payload(vocab_size=100, top_k=101)
    with pytest.raises(ValidationError, match=r"bits_per_prob must be an integer in \[1, 64\]"):
        Payload(vocab_size=100, bits_per_prob=0)


def test_zero_users_rejected():
    with pytest.raises(ValidationError, match=r"at least one user"):
        Scenario(users=(), radio=Radio(1e6), server=Server(0.01, 1e-4), payload=Payload(100, top_k=8))
    with pytest.raises(ValidationError, match=r"num_users must be an integer in \[1, inf\)"):
        random_scenario(0)


def test_payload_bits():
    p = Payload(vocab_size=32000, mode="full", bits_per_prob=16)
    assert p.id_bits == 15
    assert p.bits_per_token == 15 + 32000 * 16
    assert Payload(32000, "ids").bits_per_token == 15
    assert Payload(32000, "topk", 16, 8).bits_per_token == 15 + 8 * (15 + 16)
    assert Payload(151936, "ids").bits_per_token == 18


def test_json_round_trip(tmp_path):
    s = random_scenario(7, seed=3, preset="qwen-7b-l4")
    s2 = Scenario.from_json(s.to_json())
    assert s2 == s
    path = tmp_path / "s.json"
    s.to_json(path)
    assert Scenario.from_json(path) == s
    u = User(**GOOD_USER, acceptance_profile=(0.8, 0.6, 0.5))
    s3 = s.replace(users=(u,))
    assert Scenario.from_json(s3.to_json()) == s3


def test_json_errors_name_the_field(tmp_path):
    d = random_scenario(2, seed=0).to_dict()
    d["users"][1]["alpha"] = 1.2
    with pytest.raises(ValidationError, match=r"users\[1\]\.alpha must be in \[0, 1\)"):
        Scenario.from_json(json.dumps(d))
    with pytest.raises(ValidationError, match="not valid JSON"):
        Scenario.from_json("{bad")
    with pytest.raises(ValidationError, match="cannot read"):
        Scenario.from_json(tmp_path / "missing.json")
    d = random_scenario(2, seed=0).to_dict()
    del d["server"]
    with pytest.raises(ValidationError, match="missing the field 'server'"):
        Scenario.from_dict(d)


def test_generator_is_seeded_and_spans_ranges():
    a = random_scenario(50, seed=11)
    b = random_scenario(50, seed=11)
    c = random_scenario(50, seed=12)
    assert a == b and a != c
    lo, hi = PRESETS["llama2-7b-l4"].alpha_range
    assert np.all((a.alpha >= lo) & (a.alpha <= hi))
    d = np.array(a.meta["distance_m"])
    assert np.all((d >= 35) & (d <= 1000))
    # path loss + shadowing: gains span orders of magnitude, distance explains most of it
    assert np.corrcoef(np.log10(d), np.log10(a.gain))[0, 1] < -0.5
    assert len(set(a.tau)) > 1


def test_roofline_server_is_memory_bound():
    s = roofline_server("llama-2-7b-fp16", "nvidia-l4")
    # 13.5 GB of weights over 300 GB/s at 80 % efficiency ~ 56 ms per pass; compute per token << t0
    assert 0.04 < s.t0_s < 0.08
    assert s.t1_s_per_token < s.t0_s / 50
