"""The cached studies that run real models: keyed by the torch kernel they run on (every one of them),
and the boundary that closes the class (spinlib.cache.current_study + spinlib.sd.models.load_pair)."""
import numpy as np
import pytest

from spinlib.validation import ValidationError


def _studies():
    """Every cached study that runs a pair, with the arguments before its ``kernel`` (smallest sizes)."""
    from spinlib import random_scenario
    from spinlib.online.real_rounds import real_vs_replay
    from spinlib.sd.measure import engine_round_traces
    from spinlib.studies.engine_runs import greedy_lossless_runs, ul_dl_runs
    from spinlib.studies.replay import prompt_betas, real_rounds_vs_models

    pair = "smollm2-rtn4g16"
    return pair, [
        (greedy_lossless_runs, (pair, 1, 2), {}),
        (ul_dl_runs, (pair, 1, 2, 0), {}),
        (engine_round_traces, (pair, "qa", 1, 2, 2, {}), {}),
        (prompt_betas, (pair, 1, 2), {}),
        (real_rounds_vs_models, (random_scenario(1, 0), {}, pair, []), {"rounds": 1, "L_max": 2}),
        (real_vs_replay, (pair, ["fixed:L=2"]), {"tasks": ["qa"], "n_prompts": 1, "max_new_tokens": 2, "L_max": 2,
                                                 "delay_s": 0.0, "uplink_bps": 1e6, "energy_budget_j": 1.0}),
    ]


def test_every_model_study_refuses_a_result_keyed_by_another_kernel(monkeypatch):
    """Asked for another kernel than this machine's for the pair, each study is one line naming the
    field, before any model loads (a result computed on one kernel is never served for another)."""
    import spinlib.sd.models as MD

    monkeypatch.setattr(MD, "load_target", lambda *a, **k: pytest.fail("a model was loaded"))
    pair, studies = _studies()
    active = MD.pair_kernel(pair).kernel
    for study, args, kw in studies:
        with pytest.raises(ValidationError, match=rf"^kernel must be this machine's kernel .*{active}.*'bf16-x'$"):
            study(*args, **kw, kernel="bf16-x")
        with pytest.raises(TypeError):  # the kernel is a required argument: no study keys without it
            study(*args, **kw)


def test_current_study_is_the_cached_call_being_computed(tmp_path):
    from spinlib.cache import cached_call, current_study

    def inner(x):
        return current_study()

    def outer(x, kernel="k"):
        seen = current_study()
        nested = cached_call(inner, x + 1, cache_dir=tmp_path)
        return {"outer": seen, "nested": nested, "after": current_study()}

    def broken(x):
        raise RuntimeError("boom")

    assert current_study() is None
    rng = np.random.default_rng(np.random.SeedSequence().entropy)
    for x in rng.integers(0, 10**6, 5).tolist():
        got = cached_call(outer, x, cache_dir=tmp_path)
        assert got["outer"]["arguments"] == {"x": x, "kernel": "k"} and got["outer"]["fn"].endswith("outer")
        assert got["nested"]["arguments"] == {"x": x + 1} and got["after"] == got["outer"]
        assert current_study() is None
        with pytest.raises(RuntimeError):
            cached_call(broken, x, cache_dir=tmp_path)
        assert current_study() is None


def test_a_cached_study_cannot_load_a_machine_kernel_pair_without_naming_its_kernel(tmp_path, monkeypatch):
    """The class of fault: a study that runs a pair whose kernel is chosen per machine (``auto``) but is
    cached without the kernel in its key. load_pair refuses it inside any cached_call (one line naming
    the study); a study naming the right kernel, a call outside the cache and a fixed-kernel pair pass
    (they reach the model load, stopped here by a sentinel)."""
    import spinlib.sd.models as MD
    from spinlib.cache import cached_call
    from spinlib.sd.kernels import KernelChoice, cpu_facts

    class Loaded(Exception):
        pass

    def sentinel(*a, **k):
        raise Loaded

    monkeypatch.setattr(MD, "load_target", sentinel)
    auto = [p.name for p in MD.PAIRS.values() if p.kernel == "auto"]
    fixed = [p.name for p in MD.PAIRS.values() if p.kernel != "auto"]
    assert auto and fixed
    for name in auto:
        monkeypatch.setitem(MD._CHOICES, name, KernelChoice("bf16", "measured", cpu_facts()))

    def unkeyed(pair):
        return MD.load_pair(pair)

    def keyed(pair, kernel):
        return MD.load_pair(pair, MD.check_kernel(pair, kernel))

    for name in auto:
        with pytest.raises(ValidationError, match=rf"^cached study \S*unkeyed runs pair '{name}' on this machine's "
                                                  r"kernel 'bf16' but its key names kernel None"):
            cached_call(unkeyed, name, cache_dir=tmp_path)
        with pytest.raises(Loaded):
            cached_call(keyed, name, "bf16", cache_dir=tmp_path)
        with pytest.raises(Loaded):
            unkeyed(name)  # outside the cache: nothing to key
    for name in fixed:
        with pytest.raises(Loaded):
            cached_call(unkeyed, name, cache_dir=tmp_path)
    assert not list(tmp_path.glob("*.json"))  # nothing was cached by a refused or stopped study
