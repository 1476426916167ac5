"""Streamed WAV decoding holds up however the bytes are split."""

import io
import random

import numpy as np
import pytest
import soundfile as sf

from omnicli.audio.formats import AudioFormat, decode, encode, parse_format
from omnicli.audio.wavstream import WavStreamDecoder, streaming_wav_header
from omnicli.errors import UsageError


def tone(seconds: float, rate: int = 24000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.5 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def feed_in_pieces(decoder: WavStreamDecoder, data: bytes, seed: int) -> np.ndarray:
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(data):
        step = rng.randint(1, 700)
        out.append(decoder.feed(data[i : i + step]))
        i += step
    decoder.finish()
    return np.concatenate(out)


@pytest.mark.parametrize("seed", range(5))
def test_unknown_size_stream_in_random_pieces(seed):
    audio = tone(0.5)
    data = streaming_wav_header(24000) + encode(audio, 24000, AudioFormat.PCM)
    decoder = WavStreamDecoder()
    samples = feed_in_pieces(decoder, data, seed)
    assert decoder.rate == 24000
    assert np.allclose(samples, audio, atol=1 / 16000)


def test_back_to_back_complete_files_with_extra_chunks():
    first, second = tone(0.2, 16000), tone(0.3, 16000)
    buffer = io.BytesIO()
    with sf.SoundFile(buffer, "w", 16000, 1, "PCM_16", format="WAV") as f:
        f.write(first)
    data = buffer.getvalue() + encode(second, 16000, AudioFormat.WAV)
    decoder = WavStreamDecoder()
    samples = feed_in_pieces(decoder, data, 7)
    assert decoder.rate == 16000
    assert len(samples) == len(first) + len(second)


def test_not_wav_is_refused():
    with pytest.raises(ValueError):
        WavStreamDecoder().feed(b"<html>nope</html>")
    with pytest.raises(ValueError):
        WavStreamDecoder().finish()


def test_format_names():
    assert parse_format("PCM16") is AudioFormat.PCM
    with pytest.raises(UsageError, match="supported formats: wav, mp3, flac, opus, pcm"):
        parse_format("aac")


def test_decode_refuses_garbage():
    with pytest.raises(ValueError):
        decode(b"not audio at all")
