"""`omni speak -f` with a long text against a live `omni serve`, whose limit is OpenAI's 4,096
characters a request (issue 9): omni sends it in pieces, and the audio comes out in order."""

import soundfile as sf

from tests.helpers.speech_check import normalize, wer


def chapter(sentences: list[str], characters: int = 10_900) -> str:
    """Paragraphs of five dev sentences each, numbered so no two are alike, until long enough."""
    paragraphs: list[str] = []
    n = 0
    while sum(len(p) + 2 for p in paragraphs) < characters:
        paragraphs.append(" ".join(f"{sentences[(n + k) % len(sentences)]}" for k in range(5)))
        n += 5
    return "\n\n".join(paragraphs)


def test_a_long_text_is_spoken_whole_and_in_order(omni, omni_server, sentences, judge, tmp_path):
    text = chapter(sentences)
    source, out = tmp_path / "chapter.txt", tmp_path / "chapter.wav"
    source.write_text(text)
    result = omni("speak", "-f", str(source), "--server", omni_server, "-o", str(out), timeout=600)
    assert result.returncode == 0, result.stderr
    samples, rate = sf.read(str(out), dtype="float32")
    words = normalize(text).split()
    assert 0.25 < len(samples) / rate / len(words) < 0.6  # seconds a word: all of it was spoken
    first, last = sentences[0], text.rsplit(". ", 1)[-1]
    heard_first = judge.transcribe(samples[: 8 * rate], rate)
    heard_last = judge.transcribe(samples[-6 * rate :], rate)
    assert wer(first, " ".join(normalize(heard_first).split()[: len(first.split())])) < 0.3
    assert wer(last, " ".join(normalize(heard_last).split()[-len(last.split()) :])) < 0.3


def test_a_limit_above_the_servers_gets_its_refusal_and_writes_nothing(omni, omni_server, sentences, tmp_path):
    text = chapter(sentences)
    out = tmp_path / "chapter.wav"
    result = omni("speak", "--server", omni_server, "--max-chars", "5000", "-o", str(out), input=text.encode())
    assert result.returncode == 1
    line = result.stderr.decode()
    assert line.startswith("omni: error: server answered 400: ") and line.count("\n") == 1 and "4096" in line
    assert list(tmp_path.iterdir()) == []
