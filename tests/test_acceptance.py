import dataclasses
"""Expected tokens per round: closed form, profiles, sampling."""
import numpy as np
import pytest

from spinlib import User, random_scenario, tokens_table
from spinlib.acceptance import expected_tokens, expected_tokens_profile, iid_profile, sample_accepted


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
    pi = alpha[:, None] ** np.arange(9)[None, :]
    N = 1 + sample_accepted(L, pi, 200_000, rng)
    assert N.min() >= 1 and np.all(N.max(axis=0) <= L + 1)
    se = N.std(axis=0) / np.sqrt(N.shape[0])
    assert np.all(np.abs(N.mean(axis=0) - expected_tokens(alpha, L)) < 5 * se + 1e-12)


def test_sampler_honours_the_profile(rng):
    """The one sampler follows a measured (bursty) prefix profile, not alpha^i."""
    from spinlib import random_scenario
    from spinlib.acceptance import prefix_table

    s = random_scenario(2, seed=3)
    prof = (0.9, 0.85, 0.82, 0.8)  # far above alpha^i for alpha = 0.5
    users = (dataclasses.replace(s.users[0], alpha=0.5, acceptance_profile=prof), s.users[1])
    s = s.replace(users=users)
    pi = prefix_table(s, 4)
    np.testing.assert_allclose(pi[0, 1:], prof)
    A = sample_accepted(np.array([4, 4]), pi, 100_000, rng)
    for i in range(1, 5):
        assert abs((A[:, 0] >= i).mean() - prof[i - 1]) < 0.01
        assert abs((A[:, 1] >= i).mean() - s.alpha[1] ** i) < 0.01
