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


@pytest.mark.real_models
def test_the_real_model_runs_are_studies_over_their_prompts(tmp_path, monkeypatch):
    """The real-model runs on the smallest pair: the same records twice; one sampler seed common to every
    point, so the UL and DL generations of a prompt with the full distribution draw the same rounds; the replay study's records carry
    their point; the betas are teacher_forced_beta's on each user's prompt."""
    import spinlib.study as study_module
    from spinlib.online.real_rounds import real_vs_replay
    from spinlib.scenario import Payload
    from spinlib.sd.measure import engine_round_traces, teacher_forced_beta
    from spinlib.sd.models import get_pair, load_pair, pair_kernel
    from spinlib.sd.prompts import encode_for_pair
    from spinlib.studies.replay import prompt_betas, real_prompts

    monkeypatch.setattr(study_module, "STORES", tmp_path)
    pair = "smollm2-rtn4g16"
    k = pair_kernel(pair).kernel
    pays = {"full": Payload(49152, "full", 16), "top-8": Payload(49152, "topk", 16, top_k=8)}
    a = engine_round_traces(pair, "qa", 2, 6, 2, pays, 3, kernel=k)
    assert a == engine_round_traces(pair, "qa", 2, 6, 2, pays, 3, kernel=k)
    assert {r["seed"] for r in a} == set(study_module.study_seeds(3, 1))
    for i in (0, 1):  # with the full distribution both modes sample alike
        ul, dl = ([(r["drafted"], r["accepted"]) for r in a if (r["prompt"], r["payload"], r["mode"]) == (i, "full", m)]
                  for m in ("UL", "DL"))
        assert ul and ul == dl
    assert {(r["prompt"], r["payload"], r["mode"]) for r in a} == {(i, p, m) for i in (0, 1) for p in pays
                                                                     for m in ("UL", "DL")}
    rv = real_vs_replay(pair, ["fixed:L=2"], tasks=["qa"], n_prompts=1, max_new_tokens=4, L_max=4, delay_s=0.0,
                        uplink_bps=1e6, energy_budget_j=1.0, kernel=k)
    assert [(r["rule"], r["task"], r["prompt"]) for r in rv] == [("fixed:L=2", "qa", 0)] and rv[0]["tokens"] <= 4
    betas = prompt_betas(pair, 2, 5, kernel=k)
    target, draft, tok = load_pair(pair, k)
    for b, text in zip(betas, real_prompts(2)):
        ref = teacher_forced_beta(target, draft, encode_for_pair(get_pair(pair), tok, text), max_new_tokens=5,
                                  temperature=0.0)
        assert np.array_equal(b, ref)
    assert not list(tmp_path.glob("*.jsonl"))
