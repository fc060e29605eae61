"""The real runs of notebook 04 as cached studies (spinlib.studies.engine_runs)."""
import pytest


def test_engine_runs_refuse_a_result_keyed_by_another_kernel():
    """notebook 04's real runs are cached by the torch kernel they ran with: asked for another kernel
    than this machine's for the pair, each study is one line naming the field, before any model loads."""
    from spinlib.sd.models import pair_kernel
    from spinlib.studies.engine_runs import greedy_lossless_runs, ul_dl_runs
    from spinlib.validation import ValidationError

    active = pair_kernel("smollm2-rtn4g16").kernel
    for study, args in ((greedy_lossless_runs, ()), (ul_dl_runs, (0,))):
        with pytest.raises(ValidationError, match=rf"^kernel must be this machine's kernel .*{active}.*'bf16-x'$"):
            study("smollm2-rtn4g16", 1, 2, *args, kernel="bf16-x")
