"""The turn-taking models of one process: Silero VAD, Smart Turn and the words check, each loaded
on first use. Whoever starts the process (`omni serve`'s app, `omni talk`) makes one `TurnModels`
and passes it to every session, detector and client that hears turns, so they share one copy of
each model; a test passes its own (the fast tests: stand-ins that load nothing)."""

from omnicli.turns.silero import SileroModel
from omnicli.turns.smart_turn import SmartTurn
from omnicli.turns.text_turn import WordsCheck


class TurnModels:
    """Silero VAD, Smart Turn and the words check, one of each for a whole process."""

    def __init__(self, silero: SileroModel | None = None, smart_turn: SmartTurn | None = None,
                 words: WordsCheck | None = None) -> None:
        self.silero = silero or SileroModel()
        """Speech or not, every 32 ms."""
        self.smart_turn = smart_turn or SmartTurn()
        """Whether a pause sounds like the end of a turn."""
        self.words = words or WordsCheck()
        """Whether the words heard so far read finished."""
