"""One copy of the turn-taking models (Silero, Smart Turn, the words check) for a whole test
process: each loads once, on first use, however many sessions and clients the tests make."""

from omnicli.turns.models import TurnModels

TURN_MODELS = TurnModels()
