"""Routes that describe the server: health, models, voices, metrics."""

from fastapi import APIRouter, Request
from fastapi.responses import Response

from omnicli.engine.voices import openai_names_for
from omnicli.server.observability import PROMETHEUS_CONTENT_TYPE

router = APIRouter()


@router.get("/health")
async def health() -> dict:
    """Liveness: answers once every model is loaded."""
    return {"status": "ok"}


@router.get("/v1/models")
async def models(request: Request) -> dict:
    """The one model this server serves."""
    model_id = request.app.state.model_id
    return {"object": "list", "data": [{"id": model_id, "object": "model", "created": 0, "owned_by": "omni"}]}


@router.get("/v1/audio/voices")
async def voices(request: Request) -> dict:
    """What the server speaks (vLLM-Omni's route): names, and each voice with the OpenAI names it answers to."""
    found = await request.app.state.engine.voices()
    return {
        "voices": [v.name for v in found],
        "data": [{"name": v.name, "description": v.description, "language": v.language, "gender": v.gender,
                  "quality": v.quality, "openai_voices": openai_names_for(v, found)} for v in found],
    }


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    """Prometheus metrics."""
    return Response(request.app.state.metrics.render(), media_type=PROMETHEUS_CONTENT_TYPE)
