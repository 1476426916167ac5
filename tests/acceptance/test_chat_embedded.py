"""The embedded cascade (Whisper -> thinker -> Piper) through `omni chat` and the engine. The suite
runs on SmolLM2 (OMNI_LLM, set in conftest) for speed; the default thinker is checked here too."""

import asyncio
import json

import numpy as np
import pytest
import soundfile as sf

from omnicli.engine.base import ChatDone, ChatRequest, Message, TextPart
from omnicli.engine.staged import embedded_engine
from tests.acceptance.test_embedded_voice import synthesize
from tests.helpers.speech_check import cer, normalize, wer

QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def spoken_question(omni, tmp_path_factory):
    path = tmp_path_factory.mktemp("q") / "question.wav"
    assert omni("speak", QUESTION, "-o", str(path)).returncode == 0
    return path


def test_spoken_question_is_heard_and_answered_aloud(omni, spoken_question, tmp_path, judge):
    answer = tmp_path / "answer.wav"
    result = omni(
        "chat", "-a", str(spoken_question), "--modalities", "text,audio", "-o", str(answer),
        "--json", "--temperature", "0", "--max-tokens", "60",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert normalize(report["transcripts"][0]) == normalize(QUESTION)
    assert report["text"].strip()
    assert report["audio"] == str(answer)
    assert report["usage"]["completion_tokens"] > 0
    assert set(report["timings"]) == {"asr", "thinker", "talker", "first_text_seconds", "first_audio_seconds", "total_seconds"}
    samples, rate = sf.read(str(answer), dtype="float32")
    assert rate == 24000
    assert judge.cer_of(report["text"], samples, rate) < 0.2


def test_the_default_thinker_answers_simple_questions_in_english(omni):
    """Qwen2.5 1.5B, omni's default: the facts SmolLM2 got wrong or answered in French."""
    result = omni("chat", "--json", "--temperature", "0", "--max-tokens", "60",
                  "Answer in one short sentence. What is the capital of France?", env={"OMNI_LLM": ""}, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "paris" in json.loads(result.stdout)["text"].lower()
    result = omni("chat", "--json", "--temperature", "0", "--max-tokens", "60",
                  "Answer with the number only. What is 12 times 12?", env={"OMNI_LLM": ""})
    assert result.returncode == 0, result.stderr
    assert "144" in json.loads(result.stdout)["text"]


def test_text_streams_to_stdout(omni):
    result = omni("chat", "Say hello.", "--temperature", "0", "--max-tokens", "30")
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().strip()
    assert result.stderr == b""


def test_piped_stdin_reaches_the_model(omni):
    """The exact message is asserted in tests/fast/test_cli_chat.py; here the real model must
    count the piped words on top of the prompt's."""
    args = ("chat", "--json", "--temperature", "0", "--max-tokens", "5", "Repeat the words above.")
    piped = omni(*args, input=b"banana apple cherry\n")
    alone = omni(*args)
    assert piped.returncode == alone.returncode == 0, piped.stderr + alone.stderr
    tokens = [json.loads(r.stdout)["usage"]["prompt_tokens"] for r in (piped, alone)]
    assert tokens[0] >= tokens[1] + 3


def test_first_audio_comes_before_the_thinker_finishes():
    request = ChatRequest(
        [Message("system", [TextPart("You are a helpful assistant.")]),
         Message("user", [TextPart("Tell me three short facts about cats.")])],
        modalities=("text", "audio"),
        temperature=0.0,
        max_tokens=120,
    )

    async def run():
        kinds, done = [], None
        async for delta in embedded_engine().chat(request):
            kinds.append(type(delta).__name__)
            done = delta if isinstance(delta, ChatDone) else done
        return kinds, done

    kinds, done = asyncio.run(run())
    talker, thinker = done.metrics["talker"], done.metrics["thinker"]
    assert talker["first_output"] < thinker["finished"]
    assert kinds.count("AudioDelta") >= 2
    # Audio is interleaved with text, not appended after it.
    assert kinds.index("AudioDelta") < len(kinds) - 1 - kinds[::-1].index("TextDelta")
    assert thinker["tokens"] > 10 and talker["rtf"] > 0


def test_interactive_session_keeps_history_and_saves(omni, tmp_path):
    saved = tmp_path / "chat.json"
    script = f"My name is Ada.\nWhat is my name?\n/save {saved}\n/reset\n/save {tmp_path / 'empty.json'}\nexit\n"
    result = omni("chat", "-i", "--temperature", "0", "--max-tokens", "30", input=script.encode())
    assert result.returncode == 0, result.stderr
    messages = json.loads(saved.read_text())["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]
    assert messages[1]["content"] == "My name is Ada."
    assert [m["role"] for m in json.loads((tmp_path / "empty.json").read_text())["messages"]] == ["system"]


def test_image_to_the_embedded_engine_is_refused(omni, tmp_path):
    image = tmp_path / "pixel.png"
    image.write_bytes(bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"))
    result = omni("chat", "What is this?", "-a", str(image))
    assert result.returncode == 2
    assert "cannot see images" in result.stderr.decode()
    assert len(result.stderr.decode().strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--format", "aac", "-o", "x.aac"], "'aac'"),
        (["--modalities", "audio"], "--modalities"),
        (["-a", "/nonexistent/clip.wav"], "cannot read attachment"),
        (["-a", "README.md"], "unknown kind of file"),
    ],
)
def test_bad_chat_input(omni, args, needle):
    result = omni("chat", "hello", *args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]


def test_undecodable_audio_attachment(omni, tmp_path):
    fake = tmp_path / "clip.wav"
    fake.write_bytes(b"RIFF....not really")
    result = omni("chat", "hello", "-a", str(fake))
    assert result.returncode == 2
    assert "not a readable audio file" in result.stderr.decode()


def test_whisper_base_is_assembled_once_and_transcribes(tmp_path, monkeypatch):
    monkeypatch.setenv("OMNI_CACHE", str(tmp_path))
    from omnicli.engine import packaged

    text = "The children built a small castle out of sand and pebbles."
    engine = embedded_engine(asr_model="base")
    transcript = asyncio.run(engine.transcribe(synthesize(text), 24000))
    # By characters: on some of Piper's takes (its durations are sampled) base hears "build ... lot
    # of", two word errors in eleven (a clean-clone CI run) for three characters in fifty-nine.
    assert cer(text, transcript.text) < 0.15
    assert engine.loaded()["asr"] == str(tmp_path / "whisper-base")
    assert packaged.whisper_base() == tmp_path / "whisper-base"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["whisper-base"]


@pytest.mark.parametrize("before, after", [(0.0, 0.5), (3.0, 3.0), (5.0, 1.0)])
def test_quick_asr_hears_a_turn_wherever_it_sits_in_the_window(before, after):
    """Conversation turns are read in a 10 s window; leading silence once made Whisper repeat
    the sentence (push-to-talk pressed early)."""
    from omnicli.audio.pcm import resample
    from omnicli.engine.asr import WhisperASR

    text = "How many days are there in a week?"
    speech = resample(synthesize(text), 24000, 16000)
    clip = np.concatenate([np.zeros(int(before * 16000)), speech, np.zeros(int(after * 16000))]).astype(np.float32)
    assert wer(text, WhisperASR().transcribe(clip, "en", quick=True).text) < 0.2


def test_llama_cpp_generates_on_every_core_until_the_talker_speaks():
    """The real llama.cpp context: two threads per token while no speech is being made, one
    while Piper synthesizes beside it (engine/cores.py)."""
    import contextlib
    import threading

    import llama_cpp

    from omnicli.engine.cores import PRIORITY, THREADS
    from omnicli.engine.thinker import LlamaThinker

    thinker = LlamaThinker()
    llm = thinker.load()
    messages = [{"role": "user", "content": "Count from one to twenty."}]
    seen = []
    with contextlib.ExitStack() as talker:
        for n, _ in enumerate(thinker.generate(messages, max_tokens=12, temperature=0.0, stop=threading.Event())):
            seen.append(llama_cpp.llama_n_threads(llm.ctx))
            if n == 3:
                talker.enter_context(PRIORITY.speaking())
    assert seen[:4] == [THREADS.cores] * 4 and set(seen[5:]) == {THREADS.cores - 1}
