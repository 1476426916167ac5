"""Fixtures the fast layer shares."""

import socket

import pytest


@pytest.fixture(autouse=True, scope="package")
def no_model_is_loaded():
    """The fast layer loads no model: making an onnxruntime session (Silero, Smart Turn, Piper), a
    llama.cpp model (the thinker, the words check) or a CTranslate2 Whisper fails the test that
    tries. Tests hear turns through the stand-ins of tests/helpers/models.py."""
    import ctranslate2
    import llama_cpp
    import onnxruntime

    def refused(*args, **kwargs):
        raise AssertionError("the fast layer loads no model: use the stand-ins (tests/helpers/models.py) "
                             "or move the test to tests/acceptance")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(onnxruntime, "InferenceSession", refused)
        patch.setattr(llama_cpp, "Llama", refused)
        patch.setattr(ctranslate2.models, "Whisper", refused)
        yield


@pytest.fixture
def silent_server():
    """A real listening socket on 127.0.0.1: the kernel accepts connections; nothing answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
