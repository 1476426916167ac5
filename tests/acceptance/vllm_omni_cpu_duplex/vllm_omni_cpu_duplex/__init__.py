"""Test-only: a vLLM-Omni pipeline that runs its duplex sessions on a small text LLM on the CPU.

No duplex speech model runs on a CPU, but vLLM-Omni's duplex stack (websocket route, handshake,
session manager and runner, replay journal, heartbeat lease, playback ledger, overlap policy) is
model-independent. This registers one pipeline through vLLM-Omni's public extension points
(`register_pipeline`, called from its `vllm_omni.general_plugins` entry point, so the engine's
worker processes see it too) whose duplex plugin is the turn-based one vLLM-Omni ships for
Qwen3-Omni, fed text instead of audio. `omni talk --duplex` is then tested against the real thing.
"""

PIPELINE = "omni_cpu_text_duplex"


def register() -> None:
    from vllm_omni.config.pipeline_registry import OMNI_PIPELINES, register_pipeline
    from vllm_omni.config.stage_config import PipelineConfig, StageExecutionType, StagePipelineConfig

    if PIPELINE in OMNI_PIPELINES:
        return
    register_pipeline(PipelineConfig(
        model_type=PIPELINE,
        default_session_mode="duplex",
        duplex_plugin="vllm_omni_cpu_duplex.plugin.TextTurnPlugin",
        default_deploy_config_name=None,
        model_arch="LlamaForCausalLM",
        stages=(StagePipelineConfig(
            stage_id=0, model_stage="thinker", execution_type=StageExecutionType.LLM_AR, input_sources=(),
            final_output=True, final_output_type="text", owns_tokenizer=True,
            sampling_constraints={"detokenize": True},
        ),),
    ))
