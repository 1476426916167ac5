"""vLLM-Omni's AsyncOmni as an omni `Engine` (`--engine vllm-omni --model M`), in this process.

Speech goes to a Qwen3-TTS model (CustomVoice, VoiceDesign, or Base cloning a reference voice),
chat to an omni model (Qwen3-Omni: text, audio and images in; text and streamed audio out). The
stages, their GPUs and their default sampling come from vLLM-Omni's stage configs; `--stage-param
STAGE.FIELD=VALUE` overrides one field of one stage's sampling. What the outputs hold is read in
`vllm_omni_output`. vLLM-Omni has no CPU worker: this runs on CUDA GPUs only.
"""

import asyncio
import copy
import io
import itertools
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from omnicli.audio.chunk import AudioChunk
from omnicli.engine.base import (
    AudioDelta,
    AudioPart,
    ChatDelta,
    ChatDone,
    ChatRequest,
    Engine,
    ImagePart,
    SpeechRequest,
    TextDelta,
    TextPart,
)
from omnicli.engine.vllm_omni_output import OutputReader
from omnicli.errors import UnsupportedError, UsageError

log = logging.getLogger("omni")

VLLM_OMNI_INSTALL = "on a CUDA GPU machine: pip install vllm-omni (with the vllm release it names)"
"""How a user installs vLLM-Omni, as every error that needs it says."""
DEFAULT_MAX_NEW_TOKENS = 2048
QWEN_OMNI_SYSTEM = ("You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of "
                    "perceiving auditory and visual inputs, as well as generating text and speech.")
_AUDIO_IN_RATE = 16000
_PLACEHOLDER = {AudioPart: "<|audio_start|><|audio_pad|><|audio_end|>",
                ImagePart: "<|vision_start|><|image_pad|><|vision_end|>"}


def require_vllm_omni(flag: str = "--engine vllm-omni") -> None:
    """Refuse `--engine vllm-omni`, in one line, where it cannot run: not installed, or no GPU."""
    import importlib.util

    try:
        installed = all(importlib.util.find_spec(name) is not None for name in ("vllm_omni", "vllm", "torch"))
    except (ImportError, ValueError):
        installed = False
    if not installed:
        raise UsageError(f"{flag} needs vLLM-Omni, which is not installed here; {VLLM_OMNI_INSTALL}")
    import torch

    if not torch.cuda.is_available():
        raise UsageError(f"{flag} needs a CUDA GPU (vLLM-Omni has no CPU worker) and none is visible here; {VLLM_OMNI_INSTALL}")


def stage_params(values: list[str] | None) -> dict[int, dict[str, Any]]:
    """`--stage-param STAGE.FIELD=VALUE` flags as {stage: {field: value}}; values are JSON or text."""
    overrides: dict[int, dict[str, Any]] = {}
    for value in values or []:
        target, sep, raw = value.partition("=")
        stage, dot, name = target.partition(".")
        if not sep or not dot or not stage.strip().isdigit() or not name.strip():
            raise UsageError(f"--stage-param must look like STAGE.FIELD=VALUE (0.temperature=0.6), got {value!r}")
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = raw
        overrides.setdefault(int(stage), {})[name.strip()] = parsed
    return overrides


def with_overrides(defaults: list[Any], overrides: dict[int, dict[str, Any]], first: dict[str, Any]) -> list[Any]:
    """Each stage's default sampling, copied, with `first` applied to stage 0, then the overrides."""
    params = [copy.deepcopy(p) for p in defaults]
    for stage, fields in [(0, first), *sorted(overrides.items())]:
        if stage >= len(params):
            raise UsageError(f"--stage-param names stage {stage}; this model has stages 0..{len(params) - 1}")
        for name, value in fields.items():
            if not hasattr(params[stage], name):
                raise UsageError(f"--stage-param: stage {stage}'s sampling has no field {name!r}")
            setattr(params[stage], name, value)
    return params


def tts_information(req: SpeechRequest, *, task_type: str | None = None,
                    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> dict[str, list]:
    """A Qwen3-TTS request as vLLM-Omni's talker reads it: every value in a one-item list.

    The task follows from the request unless named: a reference voice clones (Base), a voice
    name speaks as that speaker (CustomVoice), instructions alone design a voice (VoiceDesign)."""
    task = task_type or ("Base" if req.ref_audio else "CustomVoice" if req.voice or not req.instructions else "VoiceDesign")
    if task == "Base" and not req.ref_audio:
        raise UsageError("Qwen3-TTS Base clones a voice: give --ref-audio (and --ref-text)")
    info: dict[str, list] = {"task_type": [task], "text": [req.text], "language": [req.language or "Auto"],
                             "max_new_tokens": [max_new_tokens]}
    if req.voice and task != "Base":
        info["speaker"] = [req.voice]
    if req.instructions:
        info["instruct"] = [req.instructions]
    if task == "Base":
        info["ref_audio"] = [req.ref_audio]
        if req.ref_text:
            info["ref_text"] = [req.ref_text]
        info["x_vector_only_mode"] = [not req.ref_text]  # without its words, only the voice print clones
    return info


def omni_prompt(req: ChatRequest) -> dict[str, Any]:
    """A chat in Qwen3-Omni's template, its audio (16 kHz) and images as multi_modal_data."""
    from omnicli.audio.formats import decode
    from omnicli.audio.pcm import resample

    lines, audio, images = [], [], []
    if not any(m.role == "system" for m in req.messages):
        lines.append(f"<|im_start|>system\n{QWEN_OMNI_SYSTEM}<|im_end|>\n")
    for message in req.messages:
        content = []
        for part in message.parts:
            if isinstance(part, TextPart):
                content.append(part.text)
                continue
            content.insert(0, _PLACEHOLDER[type(part)])
            if isinstance(part, AudioPart):
                try:
                    samples, rate = decode(part.data)
                except ValueError as exc:
                    raise UsageError(f"the attached {part.format} audio cannot be decoded: {exc}") from exc
                audio.append((resample(samples, rate, _AUDIO_IN_RATE), _AUDIO_IN_RATE))
            else:
                images.append(_image(part))
        lines.append(f"<|im_start|>{message.role}\n{''.join(content)}<|im_end|>\n")
    lines.append("<|im_start|>assistant\n")
    prompt: dict[str, Any] = {"prompt": "".join(lines)}
    data = {name: items[0] if len(items) == 1 else items for name, items in (("audio", audio), ("image", images)) if items}
    if data:
        prompt["multi_modal_data"] = data
    return prompt


def _image(part: ImagePart):
    from PIL import Image, UnidentifiedImageError

    try:
        return Image.open(io.BytesIO(part.data)).convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise UsageError(f"the attached {part.mime} image cannot be decoded: {exc}") from exc


class VllmOmniEngine(Engine):
    """An `Engine` over vLLM-Omni's AsyncOmni: a Qwen3-TTS model speaks, an omni model chats."""

    name = "vllm-omni"

    def __init__(self, model: str, *, stage_overrides: dict[int, dict[str, Any]] | None = None,
                 task_type: str | None = None, omni_options: dict[str, Any] | None = None) -> None:
        self.model = model
        self.stage_overrides = stage_overrides or {}
        self.task_type = task_type
        self.omni_options = dict(omni_options or {})
        """More AsyncOmni arguments (stage_configs_path, ...)."""
        self._omni: Any = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._tts_length: Any = None

    @property
    def speaks_only(self) -> bool:
        """Whether the model is a TTS model, which speaks but cannot chat."""
        return "tts" in self.model.lower()

    async def _engine(self) -> Any:
        async with self._lock:
            if self._omni is None:
                from vllm_omni.entrypoints.async_omni import AsyncOmni

                self._omni = AsyncOmni(model=self.model, **self.omni_options)
            return self._omni

    async def preload(self) -> None:
        """Start AsyncOmni now, so no request pays for loading its stages."""
        await self._engine()

    async def check(self) -> None:
        """Fail where vLLM-Omni is not installed or no CUDA GPU is visible."""
        require_vllm_omni()

    def loaded(self) -> dict[str, str]:
        """The model, once AsyncOmni has started."""
        return {"model": f"{self.model} (vLLM-Omni)"} if self._omni is not None else {}

    async def aclose(self) -> None:
        """Shut AsyncOmni down (its stage processes), off the event loop."""
        omni, self._omni = self._omni, None
        if omni is not None:
            await asyncio.to_thread(omni.shutdown)

    async def _generate(self, prompt: dict, first: dict[str, Any], modalities: list[str] | None) -> AsyncIterator[Any]:
        omni = await self._engine()
        params = with_overrides(list(omni.default_sampling_params_list), self.stage_overrides, first)
        async for output in omni.generate(prompt, request_id=f"omni-{next(self._ids)}", sampling_params_list=params,
                                          output_modalities=modalities):
            yield output

    async def speech(self, req: SpeechRequest) -> AsyncIterator[AudioChunk]:
        """Speak `req` with the Qwen3-TTS model, streaming its audio at the speed asked for."""
        if not self.speaks_only:
            raise UnsupportedError(f"{self.model} is not a TTS model; speak with a Qwen3-TTS model, or ask it "
                                   "for a spoken answer with omni chat --modalities text,audio")
        first = dict(self.stage_overrides.get(0, {}))
        max_new = int(first.get("max_tokens", DEFAULT_MAX_NEW_TOKENS))
        info = tts_information(req, task_type=self.task_type, max_new_tokens=max_new)
        prompt = {"prompt_token_ids": [0] * await asyncio.to_thread(self._placeholder_length, info),
                  "additional_information": info}
        reader = OutputReader()
        async for output in self._generate(prompt, {}, None):
            for chunk in reader.read(output)[1]:
                yield _at_speed(chunk, req.speed)

    def _placeholder_length(self, info: dict[str, list]) -> int:
        """How many prompt tokens the talker's embeddings take (vLLM-Omni's own estimate)."""
        try:
            from vllm_omni.model_executor.models.qwen3_tts.prompt_embeds_builder import Qwen3TTSPromptEmbedsBuilder

            if self._tts_length is None:
                from transformers import AutoConfig, AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(self.model, trust_remote_code=True, padding_side="left")
                talker = getattr(AutoConfig.from_pretrained(self.model, trust_remote_code=True), "talker_config", None)
                self._tts_length = (tokenizer, talker)
            tokenizer, talker = self._tts_length
            return Qwen3TTSPromptEmbedsBuilder.estimate_prompt_len_from_additional_information(
                additional_information=info, task_type=info["task_type"][0],
                tokenize_prompt=lambda text: tokenizer(text, padding=False)["input_ids"],
                codec_language_id=getattr(talker, "codec_language_id", None),
                spk_is_dialect=getattr(talker, "spk_is_dialect", None),
            )
        except Exception as exc:  # noqa: BLE001 - vLLM-Omni's own fallback, as in its examples
            log.warning("cannot estimate the Qwen3-TTS prompt length (%s); using 2048", exc)
            return 2048

    async def chat(self, req: ChatRequest) -> AsyncIterator[ChatDelta]:
        """Answer with the omni model: text deltas, and audio where asked for, then one ChatDone."""
        import time

        if self.speaks_only:
            raise UnsupportedError(f"{self.model} only speaks; chat with an omni model (Qwen3-Omni)")
        if req.voice:
            log.warning("--engine vllm-omni speaks in the model's own voice; ignoring voice %r", req.voice)
        marks = {"request": time.monotonic()}
        prompt = omni_prompt(req)
        modalities = ["text", "audio"] if req.wants_audio else ["text"]
        reader = OutputReader()
        prompt_tokens = completion_tokens = 0
        async for output in self._generate(prompt, {"max_tokens": req.max_tokens, "temperature": req.temperature},
                                           modalities):
            text, chunks = reader.read(output)
            if text:
                marks.setdefault("first_token", time.monotonic())
                yield TextDelta(text)
            for chunk in chunks:
                marks.setdefault("first_chunk", time.monotonic())
                yield AudioDelta(_at_speed(chunk, req.speed))
            if getattr(output, "final_output_type", "text") == "text":
                prompt_tokens = len(getattr(output, "prompt_token_ids", None) or []) or prompt_tokens
                completion_tokens += sum(len(c.token_ids) for c in getattr(output, "outputs", []) if getattr(c, "token_ids", None))
        yield ChatDone(
            text="".join(reader.text),
            finish_reason="length" if completion_tokens >= req.max_tokens else "stop",
            usage={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                   "total_tokens": prompt_tokens + completion_tokens},
            marks=marks,
        )


def _at_speed(chunk: AudioChunk, speed: float) -> AudioChunk:
    if speed == 1.0 or not len(chunk.samples):
        return chunk
    from omnicli.audio.tempo import change_tempo

    return AudioChunk(np.asarray(change_tempo(chunk.samples, chunk.rate, speed), dtype=np.float32), chunk.rate)
