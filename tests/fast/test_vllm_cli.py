"""`--thinker` and `--engine vllm-omni` on the real CLI and the real engine factory: what reaches
the factory, and every choice that cannot work refused in one line (exit 2) before any model loads."""

import pytest

from omnicli.cli.engines import Engines
from omnicli.engine import packaged
from omnicli.engine.vllm_models import vllm_model
from omnicli.errors import UsageError
from tests.helpers.cli_harness import ScriptedEngines, omni


def refused(*args: str) -> str:
    result = omni(*args, engines=Engines())
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("omni: error: "), result.stderr
    return lines[0].removeprefix("omni: error: ")


def test_chat_hands_the_thinker_choice_to_the_engine_factory():
    engines = ScriptedEngines()
    assert omni("chat", "--thinker", "vllm", "--llm", "smollm2", "hi", engines=engines).exit_code == 0
    assert (engines.choices[-1].thinker, engines.choices[-1].llm) == ("vllm", "smollm2")
    assert omni("chat", "hi", engines=engines).exit_code == 0
    assert engines.choices[-1].thinker is None and engines.choices[-1].engine is None


def test_chat_hands_the_vllm_omni_engine_its_model_and_stage_params():
    engines = ScriptedEngines()
    result = omni("chat", "--engine", "vllm-omni", "-m", "Qwen/Qwen3-Omni-30B-A3B-Instruct",
                  "--stage-param", "1.temperature=0.5", "hi", engines=engines)
    assert result.exit_code == 0, result.output
    choice = engines.choices[-1]
    assert (choice.engine, choice.model, choice.stage_params) == ("vllm-omni", "Qwen/Qwen3-Omni-30B-A3B-Instruct",
                                                                  ("1.temperature=0.5",))


def test_choices_that_cannot_work_are_one_line_each():
    assert refused("chat", "--thinker", "mlx", "hi") == "--thinker must be one of llama, vllm, got 'mlx'"
    assert refused("chat", "--engine", "gpu", "hi") == "--engine must be one of embedded, vllm-omni, got 'gpu'"
    assert "use one or the other" in refused("chat", "--thinker", "vllm", "--server", "http://127.0.0.1:9", "hi")
    assert "--llm-server thinks elsewhere" in refused("chat", "--thinker", "vllm", "--llm-server", "http://127.0.0.1:9", "hi")
    assert "needs --model" in refused("chat", "--engine", "vllm-omni", "hi")
    assert "drop --server" in refused("chat", "--engine", "vllm-omni", "-m", "M", "--server", "http://127.0.0.1:9", "hi")
    assert "needs --engine vllm-omni" in refused("chat", "--stage-param", "0.temperature=1", "hi")
    assert "STAGE.FIELD=VALUE" in refused("chat", "--engine", "vllm-omni", "-m", "M", "--stage-param", "temperature", "hi")
    assert "needs --engine vllm-omni" in refused("bench-wer", "-d", __file__, "--stage-param", "0.seed=1")


def test_vllm_omni_says_what_it_needs_here():
    """No CUDA GPU on this machine: with vLLM-Omni installed or not, one line says what to install where."""
    for args in (("chat", "--engine", "vllm-omni", "-m", "Qwen/Qwen3-Omni-30B-A3B-Instruct", "hi"),
                 ("bench-wer", "-d", __file__, "--engine", "vllm-omni", "-m", "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice")):
        assert "pip install vllm-omni" in refused(*args)


def test_what_vllm_loads_for_llm(tmp_path, monkeypatch):
    monkeypatch.setenv("OMNI_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    folder.mkdir()
    with pytest.raises(UsageError, match="no config.json"):
        vllm_model(str(folder))
    (folder / "config.json").write_text("{}")
    assert vllm_model(str(folder)) == str(folder)
    assert vllm_model("Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"
    gguf = packaged.thinker_gguf("smollm2")
    with pytest.raises(UsageError, match="reads model folders, not single files"):
        vllm_model(str(gguf))
    with pytest.raises(UsageError, match="unknown LLM 'gpt-9' for --thinker vllm"):
        vllm_model("gpt-9")


def test_talk_hands_its_thinker_to_the_session(tmp_path):
    from tests.helpers.synthetic_speech import speech_file

    line = refused("talk", "--thinker", "vllm", "--server", "http://127.0.0.1:9", "--input-file", str(speech_file()),
                   "--output-file", str(tmp_path / "said.wav"))
    assert line == "--thinker vllm runs the thinker in this process; --server thinks elsewhere: use one or the other"
