"""vLLM-Omni's outputs read into omni's text and 24 kHz audio, on the real `vllm_omni` objects its
AsyncOmni yields (OmniRequestOutput, CompletionOutput carrying a MultimodalPayload); and the
`--engine vllm-omni` engine's own logic (its prompt, its requests, its sampling overrides) over an
AsyncOmni stand-in that yields those real objects, since AsyncOmni itself needs a CUDA GPU."""

import asyncio
import io

import numpy as np
import pytest

from omnicli.audio.formats import AudioFormat, encode
from omnicli.engine.base import (
    AudioDelta,
    AudioPart,
    ChatDone,
    ChatRequest,
    ImagePart,
    Message,
    SpeechRequest,
    TextDelta,
    TextPart,
)
from omnicli.engine.torch_extras import hide_unloadable
from omnicli.engine.vllm_omni import VllmOmniEngine, omni_prompt, stage_params, tts_information, with_overrides
from omnicli.engine.vllm_omni_output import OutputReader, sample_rate
from omnicli.errors import OmniError, UnsupportedError, UsageError

hide_unloadable()  # the vllm extra's CUDA builds of torchvision & co., as omni's own vLLM paths hide them
try:
    import torch
    from vllm import SamplingParams
    from vllm.outputs import CompletionOutput
    from vllm_omni.outputs import OmniRequestOutput
    from vllm_omni.outputs.mm_outputs import MultimodalCompletionOutput, MultimodalPayload
except Exception as exc:  # noqa: BLE001 - any reason the package cannot load here skips, with that reason
    pytest.skip(f"vllm_omni does not import here ({type(exc).__name__}: {exc}); install the vllm extra and "
                "vllm-omni --no-deps (see .ci/run) to run these", allow_module_level=True)


def completion(text: str = "", tokens: tuple[int, ...] = (), payload=None):
    kwargs = dict(index=0, text=text, token_ids=list(tokens), cumulative_logprob=None, logprobs=None)
    if payload is None:
        return CompletionOutput(**kwargs)
    return MultimodalCompletionOutput(**kwargs, multimodal_output=payload)


def audio_output(audio, metadata=None, *, finished=False, tensors=None):
    payload = MultimodalPayload(tensors=tensors if tensors is not None else {"audio": audio}, metadata=metadata or {})
    return OmniRequestOutput(request_id="r", outputs=[completion(payload=payload)], finished=finished,
                             final_output_type="audio", stage_id=2)


def text_output(text: str, tokens=(1,), *, finished=False, prompt=(5, 6, 7)):
    return OmniRequestOutput(request_id="r", outputs=[completion(text, tokens)], finished=finished,
                             final_output_type="text", stage_id=0, prompt_token_ids=list(prompt))


def test_an_audio_tensor_per_step_is_one_new_chunk_each_at_24_khz():
    reader = OutputReader()
    wave = torch.linspace(-0.5, 0.5, 2400)
    text, chunks = reader.read(audio_output(wave.reshape(1, -1), {"sr": torch.tensor(24000)}))
    assert text == "" and len(chunks) == 1
    assert chunks[0].rate == 24000 and chunks[0].samples.dtype == np.float32
    np.testing.assert_allclose(chunks[0].samples, wave.numpy(), atol=1e-6)
    _, again = reader.read(audio_output(wave[:1200], {"sr": 24000}))
    assert [len(c.samples) for c in again] == [1200]


def test_a_growing_list_of_chunks_gives_only_its_new_tail():
    reader = OutputReader()
    one, two, three = (torch.full((800,), v) for v in (0.1, 0.2, 0.3))
    first = reader.read(audio_output([one], {"sr": [24000]}))[1]
    second = reader.read(audio_output([one, two, three], {"sr": [24000, 24000]}))[1]
    assert [round(float(c.samples[0]), 2) for c in first + second] == [0.1, 0.2, 0.3]


def test_other_rates_are_resampled_and_a_missing_rate_is_24_khz():
    at_16k = OutputReader().read(audio_output(torch.zeros(1600), {"sr": torch.tensor(16000)}))[1]
    assert at_16k[0].rate == 24000 and abs(len(at_16k[0].samples) - 2400) <= 2
    unnamed = OutputReader().read(audio_output(torch.zeros(1000), {}))[1]
    assert len(unnamed[0].samples) == 1000  # Qwen3-Omni names no rate: 24 kHz, taken as it is
    assert sample_rate(MultimodalPayload(metadata={"sr": [None, torch.tensor(44100)]})) == 44100
    assert sample_rate({"sample_rate": 22050}) == 22050
    with pytest.raises(OmniError, match="impossible sample rate"):
        sample_rate({"sr": 0})


def test_bfloat16_audio_and_a_payload_without_audio():
    chunks = OutputReader().read(audio_output(torch.ones(10, dtype=torch.bfloat16) / 2, {"sr": 24000}))[1]
    assert chunks[0].samples.tolist() == [0.5] * 10
    assert OutputReader().read(audio_output(None, tensors={"codes": torch.ones(3)}))[1] == []


def test_text_comes_from_text_outputs_only_as_deltas():
    reader = OutputReader()
    assert reader.read(text_output("The sky"))[0] == "The sky"
    assert reader.read(text_output(" is blue."))[0] == " is blue."
    assert reader.read(audio_output(torch.zeros(10)))[0] == ""
    assert "".join(reader.text) == "The sky is blue."


def test_an_error_output_raises_its_message():
    failed = OmniRequestOutput.from_error("r", "CUDA out of memory", status_code=500)
    with pytest.raises(OmniError, match="vLLM-Omni failed the request: CUDA out of memory") as caught:
        OutputReader().read(failed)
    assert not isinstance(caught.value, UsageError)
    with pytest.raises(UsageError, match="unknown speaker"):
        OutputReader().read(OmniRequestOutput.from_error("r", "unknown speaker 'x'", status_code=400))


def test_older_wrapped_outputs_read_the_same():
    class Wrapped:  # releases before 0.20 yield a stage output around the request output(s)
        final_output_type = "audio"

        def __init__(self, inner):
            self.request_output = inner

    chunks = OutputReader().read(Wrapped([audio_output(torch.zeros(480), {"sr": 24000})]))[1]
    assert [len(c.samples) for c in chunks] == [480]


def test_stage_params_and_overrides_on_real_sampling_params():
    assert stage_params(["0.temperature=0.6", "1.max_tokens=4096", "1.stop=[\"x\"]", "2.seed=abc"]) == {
        0: {"temperature": 0.6}, 1: {"max_tokens": 4096, "stop": ["x"]}, 2: {"seed": "abc"}}
    for bad in ("temperature=1", "x.temperature=1", "0.temperature", "0.=1"):
        with pytest.raises(UsageError, match="STAGE.FIELD=VALUE"):
            stage_params([bad])
    defaults = [SamplingParams(temperature=0.9, max_tokens=100), SamplingParams(temperature=0.8, max_tokens=2000)]
    params = with_overrides(defaults, {1: {"temperature": 0.5}}, {"max_tokens": 64, "temperature": 0.2})
    assert [(p.temperature, p.max_tokens) for p in params] == [(0.2, 64), (0.5, 2000)]
    assert defaults[1].temperature == 0.8  # the engine's defaults are never changed
    with pytest.raises(UsageError, match="stages 0..1"):
        with_overrides(defaults, {2: {"temperature": 0.5}}, {})
    with pytest.raises(UsageError, match="no field 'tempreature'"):
        with_overrides(defaults, {0: {"tempreature": 0.5}}, {})


def test_qwen3_tts_requests_name_their_task():
    custom = tts_information(SpeechRequest("Hi.", voice="vivian", language="English", instructions="Happily."))
    assert custom == {"task_type": ["CustomVoice"], "text": ["Hi."], "language": ["English"], "max_new_tokens": [2048],
                      "speaker": ["vivian"], "instruct": ["Happily."]}
    design = tts_information(SpeechRequest("Hi.", instructions="A deep, slow voice."), max_new_tokens=512)
    assert design["task_type"] == ["VoiceDesign"] and design["max_new_tokens"] == [512] and "speaker" not in design
    clone = tts_information(SpeechRequest("Hi.", voice="x", ref_audio="data:audio/wav;base64,AAAA", ref_text="Hello there."))
    assert clone["task_type"] == ["Base"] and clone["ref_text"] == ["Hello there."] and clone["x_vector_only_mode"] == [False]
    assert "speaker" not in clone
    assert tts_information(SpeechRequest("Hi.", ref_audio="https://x/a.wav"))["x_vector_only_mode"] == [True]
    with pytest.raises(UsageError, match="--ref-audio"):
        tts_information(SpeechRequest("Hi."), task_type="Base")


def png() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), "red").save(buffer, format="PNG")
    return buffer.getvalue()


def test_a_qwen3_omni_prompt_places_audio_and_images_before_the_words():
    wav = encode(np.zeros(24000, dtype=np.float32), 24000, AudioFormat.WAV)
    req = ChatRequest([Message("user", [AudioPart(wav, "wav"), ImagePart(png(), "image/png"), TextPart("What is this?")])])
    prompt = omni_prompt(req)
    assert prompt["prompt"].startswith("<|im_start|>system\nYou are Qwen, a virtual human")
    assert prompt["prompt"].endswith("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
                                     "<|audio_start|><|audio_pad|><|audio_end|>What is this?<|im_end|>\n"
                                     "<|im_start|>assistant\n")
    audio, rate = prompt["multi_modal_data"]["audio"]
    assert rate == 16000 and abs(len(audio) - 16000) <= 2
    assert prompt["multi_modal_data"]["image"].size == (4, 4)
    own = omni_prompt(ChatRequest([Message("system", [TextPart("Be terse.")]), Message("user", [TextPart("Hi")])]))
    assert own == {"prompt": "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"}
    with pytest.raises(UsageError, match="cannot be decoded"):
        omni_prompt(ChatRequest([Message("user", [AudioPart(b"not audio", "wav")])]))


class StandInOmni:
    """AsyncOmni's interface (generate, default_sampling_params_list, shutdown) yielding real outputs."""

    def __init__(self, outputs):
        self.outputs = outputs
        self.default_sampling_params_list = [SamplingParams(temperature=0.9), SamplingParams(temperature=0.9),
                                             SamplingParams()]
        self.asked: list[dict] = []

    async def generate(self, prompt, request_id="", *, sampling_params_list=None, output_modalities=None):
        self.asked.append({"prompt": prompt, "params": sampling_params_list, "modalities": output_modalities})
        for output in self.outputs:
            yield output

    def shutdown(self):
        self.outputs = []


def run(agen):
    async def collect():
        return [item async for item in agen]

    return asyncio.run(collect())


def test_chat_streams_text_then_audio_and_ends_with_usage():
    engine = VllmOmniEngine("Qwen/Qwen3-Omni-30B-A3B-Instruct", stage_overrides={1: {"temperature": 0.3}})
    engine._omni = omni = StandInOmni([text_output("Hello", (1,)), text_output(" there.", (2, 3), finished=True),
                                       audio_output([torch.zeros(2400)], {"sr": 24000}),
                                       audio_output([torch.zeros(2400), torch.zeros(1200)], {"sr": 24000}, finished=True)])
    req = ChatRequest([Message("user", [TextPart("Hi")])], modalities=("text", "audio"), max_tokens=3, temperature=0.1)
    deltas = run(engine.chat(req))
    assert [type(d).__name__ for d in deltas] == ["TextDelta", "TextDelta", "AudioDelta", "AudioDelta", "ChatDone"]
    assert [d.text for d in deltas if isinstance(d, TextDelta)] == ["Hello", " there."]
    assert [len(d.chunk.samples) for d in deltas if isinstance(d, AudioDelta)] == [2400, 1200]
    done = deltas[-1]
    assert isinstance(done, ChatDone) and done.text == "Hello there." and done.finish_reason == "length"
    assert done.usage == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    asked = omni.asked[0]
    assert asked["modalities"] == ["text", "audio"]
    assert [(p.temperature, p.max_tokens) for p in asked["params"]][:2] == [(0.1, 3), (0.3, 16)]
    with pytest.raises(UnsupportedError, match="not a TTS model"):
        run(engine.speech(SpeechRequest("Hi.")))


def test_speech_asks_qwen3_tts_and_yields_its_audio():
    engine = VllmOmniEngine("Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice", stage_overrides={0: {"max_tokens": 300}})
    engine._omni = omni = StandInOmni([audio_output(torch.zeros(4800), {"sr": torch.tensor(24000)}),
                                       audio_output(torch.zeros(2400), {"sr": torch.tensor(24000)}, finished=True)])
    engine._tts_length = "unusable"  # no model files here: vLLM-Omni's own fallback length applies
    chunks = run(engine.speech(SpeechRequest("Good morning.", voice="vivian", speed=1.0)))
    assert [len(c.samples) for c in chunks] == [4800, 2400]
    prompt = omni.asked[0]["prompt"]
    assert prompt["additional_information"]["max_new_tokens"] == [300]
    assert prompt["additional_information"]["speaker"] == ["vivian"] and len(prompt["prompt_token_ids"]) == 2048
    assert omni.asked[0]["params"][0].max_tokens == 300
    with pytest.raises(UnsupportedError, match="only speaks"):
        run(engine.chat(ChatRequest([Message("user", [TextPart("Hi")])])))
    asyncio.run(engine.aclose())
    assert engine._omni is None
