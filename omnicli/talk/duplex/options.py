"""What `omni talk --duplex` is asked to do: its options from the command line (checked before
anything opens), the link to the server, and the switch to duplex when a server greets with it."""

from dataclasses import dataclass
from typing import Any

from omnicli.talk.duplex.link import DuplexLink
from omnicli.talk.duplex.presets import PRESETS, Preset
from omnicli.talk.sources import FRAME_MS
from omnicli.turns.modes import TurnMode

MAX_APPEND_MS = 200
"""The longest microphone audio one append carries."""


@dataclass(frozen=True)
class DuplexOptions:
    """How a duplex talk converses: the preset, how turns end, what the session is asked for."""

    preset: Preset
    ref_audio: str | None = None
    """The voice clip as a data URL (presets that need one)."""
    turns: TurnMode = TurnMode.CLIENT
    """CLIENT (Silero: a pause commits), SMART (Silero + Smart Turn) or SERVER (never commit:
    the server and the model decide alone)."""
    echo_gate: bool = True
    instructions: str | None = None
    voice: str | None = None
    model: str | None = None
    frame: str | None = None
    """`--image`: a picture (base64 JPEG/PNG) the model sees as a still camera: it rides the append
    that closes each of the model's input units (`chunk_period_ms`, else a second) as `video_frames`.
    Only a model that reads video (MiniCPM-o 4.5) looks at it; the others ignore it."""

    def __post_init__(self) -> None:
        """`turns` given by its word ("ptt", "smart", ...) is held as the mode itself."""
        object.__setattr__(self, "turns", TurnMode(self.turns))


def append_ms(chunk_period_ms: int | None) -> int:
    """How much microphone audio one append carries: the model's unit where it is short
    (PersonaPlex's 80 ms), else 200 ms (five to MiniCPM-o's 1 s unit), in whole mic frames; never
    more held back than that."""
    period = chunk_period_ms or MAX_APPEND_MS
    return max(FRAME_MS, min(period, MAX_APPEND_MS) // FRAME_MS * FRAME_MS)


def duplex_options(preset_name: str | None, ref_audio: str | None, *, vad: str | None,
                   echo_gate: bool = True, instructions: str | None = None, voice: str | None = None,
                   model: str | None = None, image: str | None = None) -> DuplexOptions:
    """`omni talk --duplex`'s command line, checked before anything is opened (usage errors)."""
    from omnicli.talk.duplex.presets import camera_frame, preset, ref_audio_data_url

    chosen = preset(preset_name, ref_audio)
    mode = TurnMode.chosen(vad) or TurnMode.CLIENT
    turns = TurnMode.SERVER if mode.by_server else mode  # the lane's own turn ends are semantic
    return DuplexOptions(chosen, ref_audio_data_url(ref_audio) if ref_audio else None, turns=turns,
                         echo_gate=echo_gate, instructions=instructions, voice=voice, model=model,
                         frame=camera_frame(image) if image else None)


def duplex_link(connection, model: str | None, log) -> DuplexLink:
    """The link to the first server of `connection`, writing every event to `log` (--transcript)."""
    return DuplexLink(connection.servers[0], connection.api_key, model, log=log.write)


async def duplex_if_offered(transport, options, connection, model: str | None, log, *, say) -> tuple[Any, Any]:
    """(options, transport) for a talk begun without --duplex: the turn-based ones, unless the
    server's greeting offers duplex; then duplex ones, the model-neutral preset, and a note."""
    from omnicli.talk.duplex.probe import greeting

    duplex, greeted = await greeting(transport, options.model)
    if not duplex:
        return options, greeted
    say("omni talk: the server offers full duplex (its session.created has duplex capabilities): talking duplex")
    turns = {TurnMode.PUSH_TO_TALK: TurnMode.CLIENT, TurnMode.SEMANTIC: TurnMode.SERVER}.get(options.turns, options.turns)
    chosen = DuplexOptions(PRESETS["default"], turns=turns,
                           echo_gate=options.echo_gate, instructions=options.instructions, voice=options.voice,
                           model=options.model)
    return chosen, duplex_link(connection, model, log)
