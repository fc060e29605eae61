import os
import sys

import numpy as np
import pytest

os.environ.setdefault("MPLBACKEND", "agg")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(autouse=True, scope="module")
def _release_models_after_each_module():
    """The models a test module loaded are released when it ends (spinlib.sd.models.release_models): the
    process keeps every loaded model otherwise, all of them resident at once by the suite's end."""
    yield
    models = sys.modules.get("spinlib.sd.models")
    if models is not None:
        models.release_models()
