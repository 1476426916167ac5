"""llama.cpp's extra CPU buffer types (AMX) crash under a VM that advertises AMX without enabling
it: where the CPU reports AMX, omni loads models without them, and only while it loads."""

import llama_cpp
import llama_cpp.llama as wrapper

from omnicli.engine import llama_load


def test_with_amx_models_load_without_extra_buffer_types_and_the_default_comes_back(monkeypatch):
    monkeypatch.setattr(llama_load, "cpu_has_amx", lambda: True)
    assert wrapper.llama_cpp.llama_model_default_params().use_extra_bufts
    with llama_load.plain_cpu_buffers():
        assert not wrapper.llama_cpp.llama_model_default_params().use_extra_bufts
    assert wrapper.llama_cpp.llama_model_default_params().use_extra_bufts
    assert wrapper.llama_cpp.llama_model_default_params is llama_cpp.llama_model_default_params


def test_without_amx_nothing_changes(monkeypatch):
    monkeypatch.setattr(llama_load, "cpu_has_amx", lambda: False)
    before = wrapper.llama_cpp.llama_model_default_params
    with llama_load.plain_cpu_buffers():
        assert wrapper.llama_cpp.llama_model_default_params is before


def test_the_server_command_runs_llama_cpp_server_with_its_arguments():
    import subprocess

    done = subprocess.run(llama_load.llama_server_command("--help"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--model" in done.stdout
