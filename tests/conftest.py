import os

import numpy as np
import pytest

os.environ.setdefault("MPLBACKEND", "agg")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
