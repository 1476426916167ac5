"""vLLM-Omni's turn-based Qwen3-Omni duplex plugin with a text LLM behind it: the model cannot hear,
so a committed turn reaches it as a line saying how long the user spoke; it answers in text."""

import asyncio

import numpy as np
import pybase64
from vllm_omni.engine.duplex.contracts import DuplexAppendPlan
from vllm_omni.engine.duplex.plugin import DuplexRuntimeConfigError
from vllm_omni.model_executor.models.qwen3_omni.duplex.plugin import Qwen3OmniDuplexPlugin


def _text(content) -> str:
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


class TextTurnPlugin(Qwen3OmniDuplexPlugin):
    plugin_id = "omni-cpu-text-turns"

    def capabilities(self, *, max_sessions):
        capabilities = super().capabilities(max_sessions=max_sessions)
        capabilities.supports_image_input = False
        capabilities.optional_input_modalities = frozenset()
        return capabilities

    async def prepare_runtime_config(self, config, *, model_config):
        self.validate_client_extra_body(config.extra_body)
        async with self._processor_lock:
            if self.processor is None:  # a tokenizer's chat template instead of Qwen's processor
                from transformers import AutoTokenizer

                self.processor = await asyncio.to_thread(AutoTokenizer.from_pretrained, model_config.model)
        return self.runtime_config_for_update(config, {})

    @staticmethod
    def _heard(payload) -> str:
        samples = np.frombuffer(pybase64.b64decode(payload["audio"], validate=True), dtype="<f4").size
        return f"(the user spoke for {samples * 1000 // 16000} ms)"

    def plan_append(self, *, request_id, fence, session_config, runtime_config, seq, turn_seq, payload, final,
                    sampling_params):
        if not final or not isinstance(payload, dict):
            raise DuplexRuntimeConfigError("generation requires a committed turn")
        history = session_config.get("qwen_messages")
        if history is None and payload.get("audio"):
            history = [{"role": "user", "audio_payload": payload}]
        if not history:
            raise DuplexRuntimeConfigError("generation requires committed audio or conversation history")
        messages = [{"role": "system", "content": runtime_config["instructions"]}] if runtime_config.get("instructions") else []
        for message in history:
            if "audio_payload" in message:
                messages.append({"role": "user", "content": self._heard(message["audio_payload"])})
            else:
                messages.append({"role": message.get("role", "user"), "content": _text(message.get("content"))})
        messages = [{**m, "content": _text(m.get("content"))} for m in self.format_history(messages)]
        prompt = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return DuplexAppendPlan(prompt={"prompt": prompt})
