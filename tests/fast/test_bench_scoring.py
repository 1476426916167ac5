"""The scorer matches jiwer after Seed-TTS-eval normalisation, on known pairs."""

import jiwer
import pytest

from omnicli.bench.dataset import load_dataset
from omnicli.bench.scoring import normalize, percentile, score, summarize
from omnicli.errors import UsageError

PAIRS = [
    # reference, hypothesis, expected normalized reference, expected normalized hypothesis
    ("Hello, world!", "hello world", "hello world", "hello world"),
    ("It's John's car.", "its johns car", "it's john's car", "its johns car"),
    ("The meeting is at THREE o'clock.", "The meeting is at 3 o'clock", "the meeting is at three o'clock", "the meeting is at 3 o'clock"),
    ("Seven forty-five; hurry!", "seven forty five hurry", "seven fortyfive hurry", "seven forty five hurry"),
    ("Wait... what?", "wait what", "wait what", "wait what"),
    ("你好，世界！", "你好世界", "你 好 世 界", "你 好 世 界"),
    ("今天天气很好。", "今天天气不好", "今 天 天 气 很 好", "今 天 天 气 不 好"),
    ("「我们」走吧～", "我们走", "我 们 走 吧", "我 们 走"),
]


@pytest.mark.parametrize("reference, hypothesis, truth, hypo", PAIRS)
def test_normalisation_and_wer_match_jiwer(reference, hypothesis, truth, hypo):
    result = score(reference, hypothesis)
    assert (result.reference, result.hypothesis) == (truth, hypo)
    expected = jiwer.process_words(truth, hypo)
    assert result.wer == pytest.approx(expected.wer)
    assert (result.substitutions, result.deletions, result.insertions, result.hits) == (
        expected.substitutions, expected.deletions, expected.insertions, expected.hits)


def test_known_error_counts():
    result = score("the cat sat on the mat", "the cat sat on mat today")
    assert (result.substitutions, result.deletions, result.insertions) == (2, 0, 0)
    assert result.wer == pytest.approx(2 / 6)
    shifted = score("alpha bravo charlie delta", "alpha charlie delta echo")
    assert (shifted.substitutions, shifted.deletions, shifted.insertions) == (0, 1, 1)
    assert score("你好世界", "你好").wer == pytest.approx(0.5)  # a CER


def test_empty_hypothesis_counts_every_word_deleted():
    result = score("one two three", "")
    assert result.wer == 1.0 and result.deletions == 3


def test_whisper_normalizer_is_optional():
    assert normalize("Mr. Smith paid $20.", "en", "whisper") != normalize("Mr. Smith paid $20.", "en")
    assert score("Mister Smith", "Mr. Smith", normalizer="whisper").wer == 0.0


def test_summary_figures():
    records = [
        {"utt": "a", "status": "ok", "wer": 0.0, "substitutions": 0, "deletions": 0, "insertions": 0, "hits": 10, "ttfa": 0.2, "rtf": 0.1, "audio_seconds": 3},
        {"utt": "b", "status": "ok", "wer": 0.5, "substitutions": 1, "deletions": 0, "insertions": 0, "hits": 1, "ttfa": 0.4, "rtf": 0.3, "audio_seconds": 1},
        {"utt": "c", "status": "no_audio"},
        {"utt": "d", "status": "request_failed"},
    ]
    summary = summarize(records)
    assert summary["wer_mean"] == pytest.approx(0.25)
    assert summary["wer_corpus"] == pytest.approx(1 / 12)
    assert summary["failures"] == {"request_failed": 1, "no_audio": 1, "asr_failed": 0}
    assert summary["ttfa_p50"] == pytest.approx(0.3) and summary["audio_seconds"] == 4
    assert percentile([1, 2, 3, 4, 5], 0.9) == pytest.approx(4.6)


def test_dataset_parsing(tmp_path):
    listing = tmp_path / "meta.lst"
    listing.write_text(
        "# a comment\n"
        "u1|hello there|prompts/u1.wav|Say this first.\n"
        "\n"
        "u2|only three|fields\n"
        "u3|||Say this third.|extra column\n"
        "u1|dup|p.wav|Again.\n"
        "|no id|x.wav|text\n"
    )
    data = load_dataset(listing)
    assert [i.utt for i in data.items] == ["u1", "u3"]
    assert data.items[0].prompt_wav == tmp_path / "prompts" / "u1.wav"
    assert data.items[1].prompt_wav is None and data.items[1].text == "Say this third."
    assert [m.split(":")[0] for m in data.malformed] == ["line 4", "line 6", "line 7"]
    plain = tmp_path / "plain.txt"
    plain.write_text("First sentence.\n\nSecond sentence.\n")
    assert [(i.utt, i.text) for i in load_dataset(plain).items] == [("line_0001", "First sentence."), ("line_0003", "Second sentence.")]
    with pytest.raises(UsageError, match="not found"):
        load_dataset(tmp_path / "missing.lst")
