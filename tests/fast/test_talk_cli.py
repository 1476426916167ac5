"""`omni talk` on the command line: files it could not write are refused before the conversation
starts (one line, exit 2), and `--vad` picks how turns end."""

import pytest

from omnicli.cli.main import main
from omnicli.talk.client import TalkClient, TalkOptions
from omnicli.talk.speakers import FileSpeaker
from omnicli.talk.transport import LocalTransport
from omnicli.turns.talk_modes import ClientVAD
from tests.helpers.cli_harness import ScriptedEngines
from tests.helpers.cli_harness import omni as omni_app
from tests.helpers.models import TURN_MODELS
from tests.helpers.scripted import ScriptedEngine, answer
from tests.helpers.synthetic_speech import speech_file
from tests.helpers.talk_harness import Log, Quiet, Voice


@pytest.fixture(autouse=True)
def no_config(monkeypatch, tmp_path):
    for name in ("OMNI_SERVER", "OMNI_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OMNI_TRACEBACK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMNI_CONFIG", str(tmp_path / "missing.toml"))


def omni(capsys, *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    return exited.value.code, capsys.readouterr().err


@pytest.mark.parametrize("where", ["missing/said.wav", "a_file/said.wav"])
def test_output_file_in_a_missing_folder_fails_before_the_conversation(capsys, tmp_path, where):
    (tmp_path / "a_file").write_text("")
    transcript = tmp_path / "events.jsonl"
    code, err = omni(capsys, "talk", "--input-file", str(speech_file()), "--output-file", str(tmp_path / where),
                     "--transcript", str(transcript))
    assert code == 2
    assert err.strip().splitlines() == [f"omni: error: cannot write --output-file {tmp_path / where}: no such folder {(tmp_path / where).parent}"]
    assert not transcript.exists()  # nothing was started


def test_output_file_that_is_a_folder_is_refused(capsys, tmp_path):
    code, err = omni(capsys, "talk", "--input-file", str(speech_file()), "--output-file", str(tmp_path))
    assert code == 2 and err.strip() == f"omni: error: cannot write --output-file {tmp_path}: it is a folder"


def test_transcript_in_an_unwritable_place_fails_with_one_line(capsys, tmp_path):
    (tmp_path / "a_file").write_text("")
    code, err = omni(capsys, "talk", "--input-file", str(speech_file()), "--transcript", str(tmp_path / "a_file" / "x.jsonl"))
    assert code == 2
    assert err.strip().splitlines() == [
        f"omni: error: cannot write --transcript {tmp_path / 'a_file' / 'x.jsonl'}: no such folder {tmp_path / 'a_file'}"]


def test_vad_smart_ends_turns_with_smart_turn(tmp_path):
    """`--vad smart`: client VAD whose pauses Smart Turn judges; the spoken question is answered."""
    engines = ScriptedEngines(ScriptedEngine(chat=answer("It is noon.", audio_seconds=0.5)))
    said, log = tmp_path / "said.wav", tmp_path / "events.jsonl"
    result = omni_app("talk", "--vad", "smart", "--input-file", speech_file(), "--output-file", said, "--transcript", log,
                      engines=engines)
    assert result.exit_code == 0, result.stderr
    assert "omni: It is noon." in result.stderr
    assert "omni talk: 1 turn answered, median" in result.stderr
    assert said.exists()


def test_vad_smart_is_the_semantic_client_detector():
    client = TalkClient(LocalTransport(ScriptedEngine(), models=TURN_MODELS), Voice(), FileSpeaker(), TalkOptions(turns="smart"), Quiet(), Log(), TURN_MODELS)
    assert isinstance(client.strategy, ClientVAD) and client.strategy.semantic


def test_an_unknown_vad_is_a_usage_error(capsys):
    code, err = omni(capsys, "talk", "--vad", "sometimes")
    assert code == 2 and err.strip() == "omni: error: --vad must be 'client', 'smart', 'server' or 'semantic', got 'sometimes'"
