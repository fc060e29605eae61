"""The studies the notebooks run: the library's top layer.

A study is a function of plain arguments that returns JSON-able records (for
:func:`spinlib.cache.cached_call`); it composes models, solvers and controllers from the packages
below and nothing below imports it (``tests/test_architecture.py`` checks the layering). Every randomised
campaign here runs as a :class:`spinlib.study.Study` (records first, one master seed, the same seeds at
every point, resumable, on joblib or Dask) whose point function is defined beside it; so do the arena's
replicates (:func:`.online.arena_study`) and every real-model run (:mod:`.engine_runs`, :mod:`.replay`,
:func:`spinlib.sd.measure.engine_round_traces`, :func:`spinlib.online.real_rounds.real_vs_replay`: points
over prompts, rules or allocations, one worker by default, the kernel checked before the study starts).
What is not a Study: the deterministic tables (where speculation starts to pay, critical delays, the
log-growth law, the counterexample), the solve-time ladder (timings of fixed instances
``random_instance(K, seed=K)``) and the bootstrap intervals over measurements: single computations.

* :mod:`.allocation` -- notebooks 01, 03, 06, 07: the searches against exhaustive references, the closed
  form against simulated rounds, the testbed against the analysis, a measured preset's gains;
* :mod:`.paper_maps` -- notebooks 03, 06: the point functions of the papers' mapped claims;
* :mod:`.online` -- notebook 10: critical delays, regret, drift, GELATO, the SpecStop margins;
* :mod:`.replanning` -- notebook 10: the multi-user re-planners under fading;
* :mod:`.balance` -- notebook 09: BALANCE's sweeps, ratio campaign and solve-time ladder;
* :mod:`.replay` -- notebook 07: replayed real rounds against the analysis;
* :mod:`.engine_runs` -- notebook 04: the real pair's lossless (temperature 0) and UL/DL (temperature 1)
  runs.

A study that runs a model pair (:mod:`.engine_runs`' two, :mod:`.replay`'s ``prompt_betas`` and
``real_rounds_vs_models``, and, below this layer, :func:`spinlib.sd.measure.engine_round_traces` and
:func:`spinlib.online.real_rounds.real_vs_replay`) takes the torch kernel it runs on as its ``kernel``
argument, part of its key, and checks it (:func:`spinlib.sd.models.check_kernel`); inside
:func:`spinlib.cache.cached_call`, :func:`spinlib.sd.models.load_pair` refuses a pair whose kernel is
chosen per machine when the study's key does not name that kernel.

The sweep pipeline (specs, scenario factories, long records) is :mod:`spinlib.experiments`. Each module here names its ``CACHE_NAMESPACE``, the module its studies
were first cached under, so that moving a study does not invalidate its cached results.
"""
