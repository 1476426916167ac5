"""Both embedded voices speak where a voice is taken in process, `omni chat` and `omni talk`: which one
spoke is told by the real speaker encoder (bench-wer's --sim), against a clip `omni speak` made in
each voice, and what it said by Whisper."""

import asyncio

import numpy as np
import pytest
import soundfile as sf

from omnicli.bench.similarity import DVectorSimilarity
from tests.acceptance.test_embedded_voice import synthesize

VOICES = ["heart", "joe"]


@pytest.fixture(scope="module")
def references(tmp_path_factory) -> dict:
    """A clip of each voice, to compare answers with."""
    folder = tmp_path_factory.mktemp("voices")
    text = "This is how I sound when I read a sentence of my own, slowly and clearly."
    paths = {}
    for voice in VOICES:
        paths[voice] = folder / f"{voice}.wav"
        sf.write(paths[voice], synthesize(text, voice=voice), 24000)
    return paths


def spoken_by(references: dict, samples: np.ndarray, rate: int) -> dict:
    """The similarity of `samples` to each voice's reference clip."""
    encoder = DVectorSimilarity()
    return {voice: asyncio.run(encoder.similarity(path, samples, rate)) for voice, path in references.items()}


@pytest.mark.parametrize("voice", VOICES)
def test_chat_answers_aloud_in_the_voice_asked_for(omni, tmp_path, references, judge, voice):
    out = tmp_path / "answer.wav"
    result = omni("chat", "Say: the weather is lovely today.", "--modalities", "text,audio", "--voice", voice, "-o", str(out))
    assert result.returncode == 0, result.stderr
    samples, rate = sf.read(out, dtype="float32")
    text = result.stdout.decode().strip()
    assert text and judge.cer_of(text, samples, rate) < 0.3
    similarity = spoken_by(references, samples, rate)
    other = next(v for v in VOICES if v != voice)
    assert similarity[voice] > 0.6 and similarity[voice] > similarity[other] + 0.2, similarity


@pytest.mark.parametrize("voice", VOICES)
def test_talk_in_process_answers_in_the_voice_asked_for(omni, tmp_path, references, voice):
    question = tmp_path / "question.wav"
    sf.write(question, np.concatenate([np.zeros(12000, np.float32), synthesize("What do bees make?", voice="joe"),
                                       np.zeros(24000, np.float32)]), 24000)
    said = tmp_path / "said.wav"
    result = omni("talk", "--input-file", str(question), "--output-file", str(said), "--voice", voice)
    assert result.returncode == 0, result.stderr
    samples, rate = sf.read(said, dtype="float32")
    similarity = spoken_by(references, samples, rate)
    other = next(v for v in VOICES if v != voice)
    assert similarity[voice] > 0.6 and similarity[voice] > similarity[other] + 0.2, similarity
