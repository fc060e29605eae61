"""Expected tokens per round: closed form, profiles, sampling."""
import numpy as np
import pytest

from spinlib import User, random_scenario, tokens_table
from spinlib.acceptance import expected_tokens, expected_tokens_profile, iid_profile, sample_tokens_per_round


def test_closed_form_equals_sum():
    for alpha in [0.0, 0.3, 0.9, 0.999]:
        for L in range(0, 12):
            assert expected_tokens(alpha, L) == pytest.approx(sum(alpha**i for i in range(L + 1)))
    assert expected_tokens(0.5, 0) == 1.0  # autoregressive fallback: one token per round


def test_profile_matches_iid():
    prof = iid_profile(0.7, 10)
    L = np.arange(11)
    np.testing.assert_allclose(expected_tokens_profile(prof, L), expected_tokens(0.7, L))
    with pytest.raises(ValueError, match="profile holds 10 positions"):
        expected_tokens_profile(prof, 11)


def test_tokens_table_uses_profile_then_alpha():
    s = random_scenario(2, seed=0)
    u = User(draft_time_s=0.01, alpha=0.5, channel_gain=1e-12, tx_power_w=0.2, acceptance_profile=(0.9, 0.6))
    s = s.replace(users=(s.users[0], u))
    t = tokens_table(s, 4)
    np.testing.assert_allclose(t[1], [1, 1.9, 2.5, 2.8, 2.95])
    np.testing.assert_allclose(t[0], expected_tokens(s.alpha[0], np.arange(5)))


def test_sampling_mean(rng):
    alpha = np.array([0.0, 0.4, 0.8, 0.95])
    L = np.array([3, 5, 4, 8])
    N = sample_tokens_per_round(alpha, L, rng, size=200_000)
    assert N.min() >= 1 and np.all(N.max(axis=0) <= L + 1)
    se = N.std(axis=0) / np.sqrt(N.shape[0])
    assert np.all(np.abs(N.mean(axis=0) - expected_tokens(alpha, L)) < 5 * se + 1e-12)
