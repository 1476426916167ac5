"""`omni speak` through the real CLI: formats, stdout, speed, rate, and every bad input."""

import io

import numpy as np
import pytest
import soundfile as sf

TEXT = "The meeting has been moved to Thursday at three in the afternoon."


def decode(data: bytes, fmt: str):
    if fmt == "pcm":
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0, 24000
    return sf.read(io.BytesIO(data), dtype="float32")


@pytest.fixture(scope="module")
def reference_seconds(omni, tmp_path_factory):
    path = tmp_path_factory.mktemp("ref") / "ref.wav"
    result = omni("speak", TEXT, "-o", str(path))
    assert result.returncode == 0, result.stderr
    info = sf.info(str(path))
    assert info.samplerate == 24000 and info.channels == 1
    return info.frames / info.samplerate


@pytest.mark.parametrize("fmt", ["wav", "mp3", "flac", "opus", "pcm"])
def test_every_format_decodes_at_the_right_rate_and_length(omni, tmp_path, judge, reference_seconds, fmt):
    path = tmp_path / f"out.{fmt}"
    result = omni("speak", TEXT, "-o", str(path))
    assert result.returncode == 0, result.stderr
    assert f"wrote {path}" in result.stderr.decode()
    samples, rate = decode(path.read_bytes(), fmt)
    assert rate == 24000
    assert abs(len(samples) / rate - reference_seconds) < 0.12 * reference_seconds
    assert judge.wer_of(TEXT, samples, rate) < 0.2


@pytest.mark.parametrize("fmt", ["wav", "mp3", "opus", "pcm"])
def test_stdout_matches_the_file(omni, tmp_path, fmt):
    path = tmp_path / f"file.{fmt}"
    assert omni("speak", TEXT, "-o", str(path)).returncode == 0
    result = omni("speak", TEXT, "-o", "-", "--format", fmt)
    assert result.returncode == 0, result.stderr
    from_stdout, rate_stdout = decode(result.stdout, fmt)
    from_file, rate_file = decode(path.read_bytes(), fmt)
    assert rate_stdout == rate_file
    # Piper samples its phoneme durations: two runs of one text differ by up to ~6 %.
    assert abs(len(from_stdout) - len(from_file)) <= 0.12 * len(from_file)
    if fmt == "wav":
        assert sf.info(io.BytesIO(result.stdout)).format_info == sf.info(str(path)).format_info


def test_piped_stdout_without_o_gets_wav(omni):
    result = omni("speak", "Hello there.")
    assert result.returncode == 0, result.stderr
    assert result.stdout[:4] == b"RIFF"


def test_speed_two_halves_the_duration(omni, tmp_path, reference_seconds):
    path = tmp_path / "fast.wav"
    assert omni("speak", TEXT, "--speed", "2", "-o", str(path)).returncode == 0
    assert 0.44 < sf.info(str(path)).duration / reference_seconds < 0.56


def test_sample_rate_of_the_written_file(omni, tmp_path, reference_seconds):
    path = tmp_path / "low.flac"
    assert omni("speak", TEXT, "--sample-rate", "16000", "-o", str(path)).returncode == 0
    info = sf.info(str(path))
    assert info.samplerate == 16000
    assert abs(info.duration - reference_seconds) < 0.12 * reference_seconds


def test_text_from_file_and_stdin(omni, tmp_path, judge):
    text_file = tmp_path / "in.txt"
    text_file.write_text(TEXT + "\n")
    from_file = omni("speak", "-f", str(text_file), "-o", "-", "--format", "pcm")
    from_stdin = omni("speak", "-o", "-", "--format", "pcm", input=TEXT.encode())
    dash_file = omni("speak", "-f", "-", "-o", "-", "--format", "pcm", input=TEXT.encode())
    for result in (from_file, from_stdin, dash_file):
        assert result.returncode == 0, result.stderr
        assert judge.wer_of(TEXT, *decode(result.stdout, "pcm")) < 0.2


def test_list_voices(omni):
    result = omni("speak", "--list-voices")
    assert result.returncode == 0
    rows = [line.split("\t") for line in result.stdout.decode().splitlines()]
    assert [row[:4] for row in rows] == [["heart", "en-US", "female", "high"], ["joe", "en-US", "male", "medium"]]
    assert "shimmer" in rows[0][-1] and "onyx" in rows[1][-1]  # OpenAI's names, each beside the voice it is spoken with


def one_error_line(result, code: int, *needles: str) -> None:
    assert result.returncode == code, result.stderr
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("omni: error: ")
    for needle in needles:
        assert needle in lines[0]


@pytest.mark.parametrize(
    "args, code, needles",
    [
        (["--format", "aac"], 2, ["'aac'", "wav, mp3, flac, opus, pcm"]),
        (["--speed", "5"], 2, ["--speed"]),
        (["--speed", "0.1"], 2, ["--speed"]),
        (["--format", "opus", "--sample-rate", "22050"], 2, ["22050", "48000"]),
        (["--voice", "nobody"], 2, ["nobody", "heart, joe"]),
        (["--ref-audio", "/nonexistent.wav"], 2, ["/nonexistent.wav"]),
    ],
)
def test_bad_options_fail_before_writing(omni, tmp_path, args, code, needles):
    path = tmp_path / ("out." + args[args.index("--format") + 1] if "--format" in args else "out.wav")
    one_error_line(omni("speak", TEXT, "-o", str(path), *args), code, *needles)
    assert list(tmp_path.iterdir()) == []


def test_unknown_suffix_is_refused(omni, tmp_path):
    one_error_line(omni("speak", TEXT, "-o", str(tmp_path / "out.aac")), 2, "out.aac")
    assert list(tmp_path.iterdir()) == []


def test_missing_text_file(omni, tmp_path):
    one_error_line(omni("speak", "-f", str(tmp_path / "missing.txt"), "-o", str(tmp_path / "o.wav")), 2, "missing.txt")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, stdin", [([], b""), (["   "], b""), (["-"], b"  \n")])
def test_empty_text(omni, tmp_path, args, stdin):
    one_error_line(omni("speak", *args, "-o", str(tmp_path / "o.wav"), input=stdin), 2, "no text")
    assert list(tmp_path.iterdir()) == []


def test_unwritable_output_fails_before_synthesis(omni, tmp_path):
    one_error_line(omni("speak", TEXT, "-o", str(tmp_path / "no" / "dir" / "o.wav")), 2, "cannot write", "no such folder")


@pytest.mark.parametrize("args, stdin, needle", [
    (["--sample-rate", "7", TEXT], b"", "--sample-rate"),
    (["--sample-rate", "10000000", TEXT], b"", "--sample-rate"),
    ([], b"\xff\xfe\x00binary", "stdin is not UTF-8 text"),
    (["--server", "http://127.0.0.1:99999", TEXT], b"", "Port out of range"),
])
def test_bad_input_in_a_real_process_is_one_line(omni, tmp_path, args, stdin, needle):
    one_error_line(omni("speak", *args, "-o", str(tmp_path / "o.wav"), input=stdin), 2, needle)
    assert list(tmp_path.iterdir()) == []


def test_verbose_shows_the_traceback(omni, tmp_path):
    result = omni("-v", "speak", TEXT, "--voice", "nobody", "-o", str(tmp_path / "o.wav"))
    assert result.returncode != 0
    assert "Traceback" in result.stderr.decode()
