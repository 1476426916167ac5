"""Options several commands share, declared once."""

from typing import Annotated

import typer

ServerOption = Annotated[
    list[str] | None,
    typer.Option(
        "--server",
        metavar="<url>",
        help="URL of an OpenAI-compatible server (omni serve, vLLM-Omni, OpenAI); "
        "repeat it or give a comma list to spread requests over replicas; "
        "default: the in-process engine. Env: OMNI_SERVER.",
        show_default=False,
    ),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        help="Bearer key for the server. Env: OMNI_API_KEY or OPENAI_API_KEY.",
        show_default=False,
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option("--model", "-m", help="Model name to ask the server for.", show_default=False),
]
LlmOption = Annotated[
    str | None,
    typer.Option("--llm", help="In-process thinker: qwen-1.5b (default; OMNI_LLM), qwen-0.5b, smollm2 (smallest, fastest), or a GGUF file.", show_default=False),
]
AsrModelOption = Annotated[
    str | None,
    typer.Option(
        "--asr-model",
        help="Whisper model: tiny.en (default), base, or a CTranslate2 directory.",
        show_default=False,
    ),
]
VoiceOption = Annotated[
    str | None,
    typer.Option("--voice", help="Voice name (or a Piper .onnx path in process).", show_default=False),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        help="Seconds to wait for the server's answer (connecting gives up after 5 s). Env: OMNI_TIMEOUT; default 120.",
        show_default=False,
    ),
]
AsrServerOption = Annotated[
    str | None,
    typer.Option(
        "--asr-server",
        help="Hear with this server's /v1/audio/transcriptions instead of Whisper in process (--asr-model names its model).",
        show_default=False,
    ),
]
LlmServerOption = Annotated[
    str | None,
    typer.Option(
        "--llm-server",
        help="Think with this server's /v1/chat/completions (llama.cpp, vLLM, Ollama, OpenAI) instead of the in-process LLM.",
        show_default=False,
    ),
]
LlmModelOption = Annotated[
    str | None,
    typer.Option("--llm-model", help="Model to ask --llm-server for; default: its first listed model.", show_default=False),
]
TtsServerOption = Annotated[
    str | None,
    typer.Option(
        "--tts-server",
        help="Speak with this server's /v1/audio/speech instead of Piper in process (--voice names its voice).",
        show_default=False,
    ),
]
TtsModelOption = Annotated[
    str | None,
    typer.Option("--tts-model", help="Model to ask --tts-server for.", show_default=False),
]
ThinkerOption = Annotated[
    str | None,
    typer.Option(
        "--thinker",
        metavar="llama|vllm",
        help='How the in-process thinker runs --llm: llama (llama.cpp, default) or vllm (vLLM: concurrent '
        'requests batch; pip install ".[vllm]"; --llm then also takes a model folder, or org/model on a GPU).',
        show_default=False,
    ),
]
EngineOption = Annotated[
    str | None,
    typer.Option(
        "--engine",
        metavar="embedded|vllm-omni",
        help="In-process engine: embedded (ASR, thinker, talker stages; default) or vllm-omni "
        "(vLLM-Omni's AsyncOmni running --model, e.g. Qwen3-Omni or Qwen3-TTS; CUDA GPUs only).",
        show_default=False,
    ),
]
StageParamOption = Annotated[
    list[str] | None,
    typer.Option(
        "--stage-param",
        metavar="STAGE.FIELD=VALUE",
        help="--engine vllm-omni: override one field of one stage's sampling (0.temperature=0.6, 1.max_tokens=4096); repeatable.",
        show_default=False,
    ),
]
