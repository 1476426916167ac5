"""What vLLM's refusals become in omni: a prompt over the context window is a ContextWindowError
(a conversation drops old turns and asks again), other refused requests are the caller's usage
errors, anything else the thinker's failure; on vLLM's own exception classes."""

import pytest

from omnicli.engine.vllm_thinker import _translated
from omnicli.errors import ContextWindowError, OmniError, UsageError

try:
    from vllm.exceptions import VLLMValidationError
except Exception as exc:  # noqa: BLE001 - any reason vLLM cannot load here skips, with that reason
    pytest.skip(f'vLLM does not import here ({type(exc).__name__}: {exc}); pip install ".[vllm]"',
                allow_module_level=True)


def test_vllm_refusals_become_omni_errors():
    too_long = _translated(VLLMValidationError("This model's maximum context length is 4096 tokens. However, you "
                                               "requested 0 output tokens and your prompt contains at least 4097"))
    assert isinstance(too_long, ContextWindowError) and "4096 tokens" in str(too_long)
    older = _translated(ValueError("The decoder prompt (length 5000) is longer than the maximum model length of 4096."))
    assert isinstance(older, ContextWindowError)
    empty = _translated(VLLMValidationError("The decoder prompt cannot be empty"))
    assert isinstance(empty, UsageError) and not isinstance(empty, ContextWindowError)
    crashed = _translated(RuntimeError("EngineCore encountered an issue"))
    assert type(crashed) is OmniError and str(crashed) == "the vLLM thinker failed: EngineCore encountered an issue"
