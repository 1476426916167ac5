"""`omni speak` through the real Typer app over a scripted engine: files of every format, stdout,
stdin, and bad input that must cost one line and an exit code, with nothing written."""

import io

import numpy as np
import pytest
import soundfile as sf
from rich.console import Console

from omnicli.cli.main import main
from omnicli.cli.progress import PlaybackBar, playback_progress
from omnicli.errors import ServerError
from tests.helpers.cli_harness import ScriptedEngines, omni
from tests.helpers.scripted import ScriptedEngine, tone

HALF_SECOND = 12000  # the scripted engine's default speech: one 0.5 s chunk at 24 kHz


@pytest.mark.parametrize("suffix, rate", [("wav", 24000), ("wav", 16000), ("flac", 44100), ("pcm", 8000)])
def test_lossless_files_hold_exactly_the_speech(tmp_path, suffix, rate):
    path = tmp_path / f"out.{suffix}"
    engines = ScriptedEngines()
    result = omni("speak", "Hello.", "-o", path, "--sample-rate", rate, engines=engines)
    assert (result.exit_code, result.stdout) == (0, "")
    assert result.stderr == f"wrote {path} (0.5 s, {suffix}, {rate} Hz)\n"
    data = path.read_bytes()
    if suffix == "pcm":
        assert len(data) == 2 * HALF_SECOND * rate // 24000
    else:
        samples, read_rate = sf.read(io.BytesIO(data))
        assert (read_rate, len(samples)) == (rate, HALF_SECOND * rate // 24000)
    assert [r.text for r in engines.scripted.requests] == ["Hello."]
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


@pytest.mark.parametrize("suffix, rate", [("mp3", 24000), ("opus", 48000), ("ogg", 16000)])
def test_lossy_files_decode_to_the_speech_length(tmp_path, suffix, rate):
    path = tmp_path / f"out.{suffix}"
    result = omni("speak", "Hello.", "-o", path, "--sample-rate", rate, engines=ScriptedEngines())
    assert result.exit_code == 0, result.stderr
    samples, read_rate = sf.read(path)
    assert read_rate == rate
    assert abs(len(samples) / rate - 0.5) < 0.06  # codec framing adds at most a few frames


def test_dash_writes_a_wav_to_stdout_and_nothing_to_stderr():
    result = omni("speak", "Hello.", "-o", "-", engines=ScriptedEngines())
    assert (result.exit_code, result.stderr) == (0, "")
    samples, rate = sf.read(io.BytesIO(result.stdout_bytes))
    assert (rate, len(samples)) == (24000, HALF_SECOND)


def test_raw_pcm_streams_to_stdout_as_it_is_made():
    engine = ScriptedEngine(speech=[tone(0.25, "One."), tone(0.25, "Two.")])
    result = omni("speak", "One. Two.", "-o", "-", "--format", "pcm", engines=ScriptedEngines(engine))
    assert result.exit_code == 0
    pcm = np.frombuffer(result.stdout_bytes, "<i2")
    assert len(pcm) == HALF_SECOND and np.abs(pcm).max() > 8000


@pytest.mark.parametrize("args", [[], ["-"], ["--file", "-"]])
def test_text_comes_from_stdin(tmp_path, args):
    engines = ScriptedEngines()
    result = omni("speak", *args, "-o", tmp_path / "x.wav", input="  Hello from a pipe.\n", engines=engines)
    assert result.exit_code == 0, result.stderr
    assert [r.text for r in engines.scripted.requests] == ["Hello from a pipe."]


def test_options_reach_the_engine(tmp_path):
    engines = ScriptedEngines()
    result = omni("speak", "Hi", "-o", tmp_path / "x.wav", "--voice", "amy", "--speed", "1.5", "--language", "en",
                  "--instructions", "warmly", "--model", "tts-1", engines=engines)
    assert result.exit_code == 0
    (request,) = engines.scripted.requests
    assert (request.voice, request.speed, request.language, request.instructions, request.model) == (
        "amy", 1.5, "en", "warmly", "tts-1")


def test_list_voices_prints_name_language_gender_quality_description_and_openai_names():
    result = omni("speak", "--list-voices", engines=ScriptedEngines())
    openai = "alloy, ash, ballad, coral, echo, fable, nova, onyx, sage, shimmer, verse, marin, cedar"
    assert (result.exit_code, result.stdout, result.stderr) == (0, f"joe\t-\t-\t-\ta scripted voice\tOpenAI: {openai}\n", "")


def usage_error(result, line: str, engines: ScriptedEngines) -> None:
    """One line on stderr, exit 2, nothing on stdout, and the engine never asked."""
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"omni: error: {line}\n")
    assert engines.scripted.requests == []


def test_binary_stdin_is_one_line_and_exit_2(tmp_path):
    engines = ScriptedEngines()
    result = omni("speak", "-o", tmp_path / "x.wav", input=b"\xff\xfe\x00\x01RIFF", engines=engines)
    usage_error(result, "stdin is not UTF-8 text (byte 0 is 0xff)", engines)
    assert list(tmp_path.iterdir()) == []


def test_an_output_no_file_can_be_made_in_is_refused_before_any_work():
    """/proc lets root pass the permission check, yet no file can be created there."""
    engines = ScriptedEngines()
    usage_error(omni("speak", "Hi", "-o", "/proc/x.wav", engines=engines),
                "-o: cannot write /proc/x.wav: No such file or directory", engines)


def test_empty_text_is_a_usage_error(tmp_path):
    engines = ScriptedEngines()
    usage_error(omni("speak", "-o", tmp_path / "x.wav", input="  \n", engines=engines),
                "no text to speak (give it as arguments, with --file, or on stdin)", engines)


@pytest.mark.parametrize("rate", ["7", "7999", "192001", "10000000"])
def test_sample_rates_out_of_range_are_usage_errors(tmp_path, rate):
    engines = ScriptedEngines()
    result = omni("speak", "Hi", "-o", tmp_path / "x.wav", "--sample-rate", rate, engines=engines)
    assert result.exit_code == 2 and result.stdout == ""
    assert "Invalid value for '--sample-rate'" in result.stderr
    assert engines.scripted.requests == [] and list(tmp_path.iterdir()) == []


def test_a_rate_the_format_cannot_hold_is_a_usage_error(tmp_path):
    engines = ScriptedEngines()
    result = omni("speak", "Hi", "-o", tmp_path / "x.opus", "--sample-rate", "44100", engines=engines)
    usage_error(result, "opus cannot be written at 44100 Hz; use 8000, 12000, 16000, 24000, 48000", engines)


def test_usage_errors_through_main_are_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("OMNI_CONFIG", str(tmp_path / "missing.toml"))
    monkeypatch.delenv("OMNI_TRACEBACK", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["speak", "Hi", "-o", str(tmp_path / "x.wav"), "--sample-rate", "10000000"])
    captured = capsys.readouterr()
    assert exited.value.code == 2 and captured.out == ""
    assert captured.err == ("omni: error: Invalid value for '--sample-rate': Input should be less than or equal to "
                            "192000 (see 'omni speak --help')\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where, why", [("missing/x.wav", "no such folder {folder}"), ("a_file/x.wav", "no such folder {folder}"),
                                        ("a_dir", "it is a folder")])
def test_unwritable_output_fails_before_any_speech(tmp_path, where, why):
    (tmp_path / "a_file").write_text("")
    (tmp_path / "a_dir").mkdir()
    path = tmp_path / where
    engines = ScriptedEngines()
    result = omni("speak", "Hi", "-o", path, engines=engines)
    usage_error(result, f"cannot write -o {path}: " + why.format(folder=path.parent), engines)


def test_invalid_server_url_is_one_line(tmp_path):
    engines = ScriptedEngines()
    result = omni("speak", "Hi", "-o", tmp_path / "x.wav", "--server", "http://127.0.0.1:99999", engines=engines)
    usage_error(result, "--server: 'http://127.0.0.1:99999' is not a valid URL: Port out of range 0-65535", engines)
    assert engines.choices == []


def test_engine_failure_mid_speech_leaves_no_file(tmp_path):
    engine = ScriptedEngine(speech=[tone(0.2, "One."), ServerError("server answered 500: boom")])
    path = tmp_path / "x.wav"
    result = omni("speak", "One. Two.", "-o", path, engines=ScriptedEngines(engine))
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", "omni: error: server answered 500: boom\n")
    assert list(tmp_path.iterdir()) == []
    assert engine.closed == 1


def test_an_untranslated_os_error_is_still_one_line(tmp_path):
    engine = ScriptedEngine(speech=[PermissionError(13, "Permission denied", "/models/voice.onnx")])
    result = omni("speak", "Hi", "-o", tmp_path / "x.wav", engines=ScriptedEngines(engine))
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == "omni: error: Permission denied (/models/voice.onnx)\n"


class SpeakerClock:
    """Where a speaker is (frames handed to the device), as audio.player.Player reports it."""

    device_rate = 48000
    played_frames = 0


def drawn(progress) -> str:
    """The bar's line as a terminal 100 columns wide would show it."""
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(progress.get_renderable())
    return " ".join(console.file.getvalue().split())


def test_the_playback_bar_counts_seconds_played_of_seconds_made():
    progress = playback_progress(Console(file=io.StringIO()))
    speaker = SpeakerClock()
    bar = PlaybackBar(progress, speaker, characters=200)
    assert drawn(progress).endswith("0.0 / 0.0 s synthesizing 0%")
    bar.made(7.4)
    bar.spoken(80)
    speaker.played_frames = 48000 * 7 // 10
    assert drawn(progress).endswith("0.7 / 7.4 s synthesizing 40%")
    bar.made(7.6)
    bar.spoken(120)
    bar.synthesized()
    speaker.played_frames = 48000 * 12
    assert drawn(progress).endswith("12.0 / 15.0 s")
    speaker.played_frames = 48000 * 15 + 4800  # the tail's padding is not speech
    assert drawn(progress).endswith("━ 15.0 / 15.0 s")
