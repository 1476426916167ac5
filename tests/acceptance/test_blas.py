"""numpy's BLAS runs on one thread once Smart Turn or Whisper is loaded (audio/blas.py): its
spinning threads took a core from the next model. Each case in a fresh process, whose BLAS starts
with a thread per core."""

import json
import os
import subprocess
import sys

import pytest

_PROBE = """
import json
import numpy as np
from threadpoolctl import threadpool_info

def blas_threads():
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

before = blas_threads()
{load}
print(json.dumps([before, blas_threads()]))
"""


@pytest.mark.parametrize("load", [
    "from omnicli.turns.smart_turn import SmartTurn; SmartTurn().load()",
    "from omnicli.engine.asr import WhisperASR; WhisperASR().load()",
])
def test_loading_a_model_that_computes_features_with_numpy_leaves_blas_one_thread(load):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    shown = subprocess.run([sys.executable, "-c", _PROBE.format(load=load)], capture_output=True, text=True, check=True, env=env)
    before, after = json.loads(shown.stdout.strip().splitlines()[-1])
    assert before and max(before) > 1  # as numpy starts on a machine with more than one core
    assert after == [1] * len(before)
