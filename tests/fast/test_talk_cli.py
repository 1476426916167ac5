"""`omni talk` refuses files it could not write before the conversation starts: one line, exit 2."""

import pytest

from omnicli.cli.main import main

from realtime_harness import speech_file


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
