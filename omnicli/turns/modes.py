"""The names of turn-taking: how `omni talk` ends a user's turn (`--vad`), and the two kinds of
turn detection a realtime session runs (`turn_detection.type`)."""

from enum import StrEnum

from omnicli.errors import UsageError

SILENCE_RULE_MS = 500
"""The silence that ends a turn by default: server_vad's `silence_duration_ms` (OpenAI's too)."""


class Detection(StrEnum):
    """A realtime session's turn detection (`turn_detection.type`, OpenAI Realtime GA's names)."""

    SERVER_VAD = "server_vad"
    """A pause of `silence_duration_ms` ends the turn."""
    SEMANTIC_VAD = "semantic_vad"
    """Smart Turn (and the words) judge whether a pause ends the turn."""


class TurnMode(StrEnum):
    """How `omni talk` ends a user's turn: the words of `--vad`, and push-to-talk."""

    PUSH_TO_TALK = "ptt"
    CLIENT = "client"
    """omni talk's Silero: a half-second pause commits."""
    SMART = "smart"
    """omni talk's Silero with Smart Turn: a short pause after a finished sentence commits."""
    SERVER = "server"
    """The session's server_vad decides."""
    SEMANTIC = "semantic"
    """The session's semantic_vad decides."""

    @classmethod
    def chosen(cls, vad: str | None) -> "TurnMode | None":
        """The mode `--vad` names (None where it names none); a usage error names the choices."""
        if vad is None:
            return None
        try:
            return cls(vad)
        except ValueError:
            choices = [mode.value for mode in cls if mode is not cls.PUSH_TO_TALK]
            raise UsageError(f"--vad must be {', '.join(map(repr, choices[:-1]))} or {choices[-1]!r}, got {vad!r}") from None

    @property
    def by_server(self) -> bool:
        """The session decides where turns end; the client only streams."""
        return self in (TurnMode.SERVER, TurnMode.SEMANTIC)

    @property
    def semantic(self) -> bool:
        """Smart Turn judges the pauses (in the client or in the session)."""
        return self in (TurnMode.SMART, TurnMode.SEMANTIC)

    @property
    def detection(self) -> Detection:
        """The session's turn detection this mode asks for (where the session decides)."""
        return Detection.SEMANTIC_VAD if self.semantic else Detection.SERVER_VAD
