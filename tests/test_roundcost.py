"""The round-cost kernel: its sums, and every player that clocks a round calls it."""
import importlib
import re

import numpy as np
import pytest

from spinlib import roundcost


def test_sync_round_is_makespan_plus_later_phases_in_order():
    rng = np.random.default_rng(0)
    draft, up = rng.random((5, 4)), rng.random((5, 4))
    ver, dl, over = rng.random(5), rng.random(5), 0.3
    ms = roundcost.makespan(draft, up)
    np.testing.assert_array_equal(ms, (draft + up).max(axis=1))
    T = roundcost.sync_round_time(ms, ver, dl, over)
    np.testing.assert_array_equal(T, ((ms + ver) + dl) + over)  # the caller's order, bit for bit
    assert roundcost.sync_round_time(1.0, 2.0) == 3.0


def test_user_round_adds_waits_in_order():
    rng = np.random.default_rng(1)
    d, u, w1, w2 = (rng.random(6) for _ in range(4))
    np.testing.assert_array_equal(roundcost.user_round_time(d, u, w1, w2), ((d + u) + w1) + w2)


def test_iid_expected_tokens_is_the_geometric_sum():
    a = np.array([0.0, 0.3, 0.9])
    for L in range(6):
        np.testing.assert_allclose(roundcost.iid_expected_tokens(a, L), sum(a ** i for i in range(L + 1)), rtol=1e-14)


PLAYERS = re.findall(r":mod:`(spinlib\.[\w.]+)`", roundcost.__doc__.split("call it")[0].split("adds a round's phases")[1])


@pytest.mark.parametrize("module", PLAYERS)
def test_every_player_named_by_the_kernel_calls_it(module):
    """The modules the kernel's docstring names as its callers import it (and nothing else adds a round)."""
    src = importlib.import_module(module).__file__
    text = open(src, encoding="utf-8").read()
    assert re.search(r"from \.+roundcost import", text), module


def test_the_kernel_names_its_players():
    assert len(PLAYERS) == 6, PLAYERS
