"""The one decider registry (spinlib.online.deciders): capabilities, players that refuse by capability in one
line, per-user controllers in re-planning, the one spec type and its cache keys, and a CLI built
from the library's tables.

Checks: every registered decider is playable exactly where its needs are provided, and every other
player refuses it (one line, before any work); every per-user controller that re-planning can play
runs there on fresh random cells with lengths in range and finite goodput, and a per-user ``fixed``
controller is the plain :class:`~spinlib.decision.FixedLength` decider bit for bit;
:class:`~spinlib.online.energy.DeviceEnergies` is every device's own energy model; specs keep the
cache keys of the two spec types they replaced; ``--set`` parses as ``name:key=value``; no
``choices=`` in the CLI is a literal copy of a library table.
"""
import argparse
import dataclasses
import json

import numpy as np
import pytest

from spinlib.online import deciders as dc
from spinlib.cache import key_form
from spinlib.decision import FixedLength, never_stops
from spinlib.emulator import Fading
from spinlib.experiments import spec
from spinlib.online import Controller, cspec, energy as en, register_controller, replan as rep
from spinlib.online.registry import make_controller
from spinlib.presets import random_scenario
from spinlib.validation import ValidationError
from helpers import spinlib_cli


def test_every_decider_plays_exactly_where_its_needs_are_provided():
    assert set(dc.DECIDERS.entries), "the registry is empty"
    for name, entry in dc.DECIDERS.items():
        assert entry.needs <= set(dc.CAPABILITIES), name
        assert len(entry.needs & {"per-user-env", "cell-env"}) == 1, f"{name}: built on exactly one environment"
        for player, provides in dc.PLAYERS.items():
            ok = entry.needs <= provides
            assert (name in dc.playable(player)) == ok
            if ok:
                assert dc.check_playable(name, player) is entry
            else:
                with pytest.raises(ValidationError) as e:
                    dc.check_playable(name, player)
                msg = str(e.value)
                assert "\n" not in msg and repr(name) in msg and f"which {player} does not provide" in msg
    # the library's own: re-planning plays the cell's controllers and the per-user ones without observables
    assert {"replan-dinkelbach", "ucb-specstop", "fixed", "static-policy"} <= set(dc.playable("replan"))
    assert "specdec++" not in dc.playable("replan") and "replan-dinkelbach" not in dc.playable("arena")


def test_needs_follow_the_class_observables_and_declared_knowledge():
    class Looks(Controller):
        def stop(self, ctx, L_ref):
            return L_ref

    class Blind(Controller):
        @never_stops
        def stop(self, ctx, L_ref):
            return L_ref

    try:
        register_controller("test-looks", "reads its observables")(Looks)
        register_controller("test-blind", "never stops", needs=("true-survival",))(Blind)
        assert dc.DECIDERS["test-looks"].needs == {"per-user-env", "draft-observables"}
        assert dc.DECIDERS["test-blind"].needs == {"per-user-env", "true-survival"}
        assert "test-looks" not in dc.playable("replan") and "test-blind" in dc.playable("replan")
        assert "test-blind" not in dc.playable("engine")
    finally:
        dc.DECIDERS.remove("test-looks")
        dc.DECIDERS.remove("test-blind")
    with pytest.raises(ValidationError, match="needs must be among"):
        register_controller("test-bad", "x", needs=("telepathy",))


def test_players_refuse_by_capability_before_any_work():
    from spinlib.online import ArenaConfig, Stream, run_arena

    streams = [Stream.synthetic(0.7, 50, np.random.default_rng(0))]
    with pytest.raises(ValidationError, match="which arena does not provide"):
        run_arena(["fixed", "energy-queue"], streams, ArenaConfig(rounds=10))
    s = random_scenario(3, 5)
    with pytest.raises(ValidationError, match="which replan does not provide"):
        rep.run_replan(s, ["plan-on-average", "gelato"], rep.ReplanConfig(rounds=5))
    env = rep.cell_user_env(s, rep.ReplanConfig(rounds=5), en.device_energy(s), np.random.default_rng(0))
    with pytest.raises(ValidationError, match="which engine does not provide"):
        make_controller("specstop-known", env, player="engine")
    with pytest.raises(ValidationError, match="play it with replan|which arena does not provide"):
        make_controller("replan-drop", env)


@pytest.mark.parametrize("trial", range(3))
def test_every_per_user_controller_runs_in_replanning_on_fresh_cells(trial):
    seed = int(np.random.SeedSequence().entropy % 2**31)
    rng = np.random.default_rng(seed)
    K = int(rng.integers(1, 6))
    s = random_scenario(K, int(rng.integers(0, 10**6)))
    cfg = rep.ReplanConfig(rounds=int(rng.integers(8, 30)), seed=int(rng.integers(0, 10**6)),
                           fading=Fading(str(rng.choice(["static", "rayleigh", "markov"]))),
                           L_max=int(rng.integers(1, 10)))
    names = [n if n != "fixed" else "fixed:L=1" for n in dc.playable("replan")
             if "per-user-env" in dc.DECIDERS[n].needs]  # fixed's default L = 4 may exceed L_max
    assert len(names) >= 5
    res = rep.run_replan(s, names, cfg)
    for name, r in zip(names, res):
        assert r.controller == name, seed
        assert r.draft_lengths.shape == (cfg.rounds, K) and r.draft_lengths.min() >= 0, (name, seed)
        assert r.draft_lengths.max() <= cfg.L_max, (name, seed)
        assert np.isfinite(r.goodput_tokens_per_s) and r.goodput_tokens_per_s > 0, (name, seed)
        assert np.all(np.isfinite(r.energy_j)) and np.all(r.energy_j >= 0), (name, seed)
    # a per-user fixed controller is the plain FixedLength decider, bit for bit
    L = int(rng.integers(0, cfg.L_max + 1))
    (got,) = rep.run_replan(s, [f"fixed:L={L}"], cfg)
    ref = rep.play(s, FixedLength([L] * K), rep.fading_draws(s, cfg), cfg)
    assert got.goodput_tokens_per_s == ref.goodput_tokens_per_s, seed
    assert np.array_equal(got.round_times_s, ref.round_times_s) and np.array_equal(got.energy_j, ref.energy_j)


def test_device_energies_is_every_devices_own_model():
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    for _ in range(20):
        K, n = int(rng.integers(1, 7)), int(rng.integers(1, 9))
        models = tuple(en.EnergyModel(*rng.uniform(0, 2, 3)) for _ in range(K))
        de = en.DeviceEnergies(models)
        L, up, w = rng.integers(0, 9, (K, n)), rng.uniform(0, 1, (K, n)), rng.uniform(0, 1, (K, n))
        want = np.array([m.round_energy(L[k], up[k], w[k]) for k, m in enumerate(models)])
        assert np.allclose(de.round_energy(L, up, w), want, rtol=1e-12, atol=0)
        assert np.allclose(de.round_energy(L[:, 0], up[:, 0], w[:, 0]), want[:, 0], rtol=1e-12, atol=0)
        cand = np.arange(1, n + 1)[None, :]  # a [1, L_max] row of candidates broadcasts over users
        want = np.array([m.round_energy(cand[0], up[k], w[k]) for k, m in enumerate(models)])
        assert np.allclose(de.round_energy(cand, up, w), want, rtol=1e-12, atol=0)


@dataclasses.dataclass(frozen=True)
class ControllerSpec:  # the two spec types the one Spec replaced, as they were (their fields are the cache key)
    name: str
    params: tuple = ()
    label: str = ""


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    policy: str
    params: tuple = ()
    label: str = ""


def test_one_spec_type_keeps_the_cache_keys_of_the_two_it_replaced():
    a, b = cspec("ucb-specstop", gamma=0.9, c=2.0, label="x"), spec("equal", draft_length=4, round_model="async")
    assert type(a) is type(b) is dc.Spec and (a.kind, b.kind) == ("controller", "policy")
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    for _ in range(50):  # generated specs: every controller (its declared parameters) and every policy
        name = str(rng.choice(sorted(dc.DECIDERS)))
        params = {k: v for k, v in dc.DECIDERS[name].params.items() if rng.random() < 0.5}
        label = str(rng.choice(["", "a label"]))
        new = cspec(name, label, **params)
        assert key_form(new) == key_form(ControllerSpec(name, tuple(sorted(params.items())), label)), name
    from spinlib.control import POLICIES

    for name, entry in POLICIES.items():
        params = {k: v for k, v in entry.params.items() if rng.random() < 0.5}
        new = spec(name, **params)
        assert key_form(new) == key_form(PolicySpec(name, tuple(sorted(params.items())), new.label)), name
    assert b.label == "equal/async" and spec("equal").label == "equal"
    assert b.policy == b.name == "equal" and a.title == "x" and cspec("fixed", L=3).title == "fixed:L=3"
    with pytest.raises(ValidationError, match="a controller spec is needed"):
        dc.as_spec(b)


def test_set_is_sugar_for_the_spec_syntax(tmp_path):
    sc = tmp_path / "s.json"
    assert spinlib_cli("scenario", "--users", "3", "-o", str(sc)).returncode == 0
    a = spinlib_cli("solve", str(sc), "--policy", "heterogeneous-sync:gap=1e-6,max_nodes=50", "--json")
    b = spinlib_cli("solve", str(sc), "--policy", "heterogeneous-sync", "--set", "gap=1e-6", "--set", "max_nodes=50",
                    "--json")
    assert a.returncode == b.returncode == 0
    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    ja.pop("info", None), jb.pop("info", None)  # the solver's wall times
    assert ja == jb
    for bad, msg in ((["--set", "gap"], "must be key=value"), (["--set", "gap=nan"], "finite number"),
                     (["--set", "gap=1e-6", "--set", "gap=1e-7"], "given twice")):
        r = spinlib_cli("solve", str(sc), "--policy", "heterogeneous-sync", *bad)
        assert r.returncode == 2 and msg in r.stderr and r.stderr.count("\n") == 1, (bad, r.stderr)


def test_no_cli_choice_is_a_literal_copy_of_a_library_table():
    """Every ``choices=`` of the command line is a table the library defines (the same object)."""
    import spinlib.cli as cli
    from spinlib.emulator import config as ecfg, fading
    from spinlib import modes, rounds
    from spinlib.online import arena

    tables = [rounds.ROUND_MODELS, fading.FADING_MODELS, ecfg.ACCEPTANCE_MODELS, ecfg.SERVER_MODELS,
              ecfg.COMPUTE_MODELS, modes.MODES, arena.IID_DELAY_KINDS, rep.ACCEPTANCE]
    seen = 0
    stack = [cli.build_parser()]
    while stack:
        p = stack.pop()
        for act in p._actions:
            if isinstance(act, argparse._SubParsersAction):
                stack.extend(act.choices.values())
            elif act.choices is not None:
                seen += 1
                assert any(act.choices is t for t in tables), (p.prog, act.dest, act.choices)
    assert seen >= 8
