"""The turn detector: from Silero VAD's verdicts (turns/silero.py), when speech starts and when
it has stopped: after a fixed silence, or (semantic) after a short pause that Smart Turn judges a
finished turn.

The server's `turn_detection` (server_vad, semantic_vad) and `omni talk --vad client|smart` use them.
"""

import math
from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from omnicli.turns.models import TurnModels
from omnicli.turns.modes import SILENCE_RULE_MS
from omnicli.turns.silero import CHUNK, VAD_RATE, SileroVAD
from omnicli.turns.smart_turn import WINDOW_S


@dataclass
class TurnEvent:
    """A turn starting or stopping, and where in the audio fed so far."""

    kind: str  # "started" or "stopped"
    ms: int
    """Position in the audio fed so far, in milliseconds (padding applied to starts)."""
    silence_ms: int = 0
    """For a stop: the silence heard after the speech before the stop was decided."""
    probability: float | None = None
    """For a semantic stop: Smart Turn's probability that the turn was complete (None: not asked)."""
    pending: bool = False
    """A semantic stop that waits for `TurnDetector.confirm` (see `confirm_stops`)."""


SEMANTIC_PAUSE_MS = 128
"""Semantic turns: Smart Turn is first asked after this much silence (four VAD chunks). Not later:
the longer the silence it hears, the surer it is that any turn is over, finished or not, so
asking early both ends turns sooner and cuts fewer sentences."""
SEMANTIC_REASK_MS = 400
"""...and again after each further stretch of this much silence, so a turn it was unsure of ends
well before the ceiling, while a pause shorter than this in mid-sentence is judged only once."""
SEMANTIC_BEFORE_RULE_MS = 416
"""...and, unsure at first, once more at this much silence (three VAD chunks before the silence
rule's 500 ms ends a server_vad turn): a turn it then hears finished ends where that rule would end
it, not at the next ask, and not sooner (a pause it was unsure of cuts nothing that rule would not)."""


@dataclass(frozen=True)
class Eagerness:
    """How soon a semantic turn may end (OpenAI's `eagerness`)."""

    complete_at: float
    """Smart Turn's probability from which the turn is over."""
    max_silence_ms: int
    """The silence that ends a turn whatever it said."""
    read_words: bool = True
    """omni serve: a turn end Smart Turn calls must also read finished (turns/text_turn.py). Not
    for `high`, which trades cut sentences for the soonest turn ends."""


EAGERNESS = {"low": Eagerness(0.97, 3000), "medium": Eagerness(0.9, 2000), "auto": Eagerness(0.9, 2000),
             "high": Eagerness(0.5, 1500, read_words=False)}
"""`high` trusts Smart Turn's own cut-off (0.5). Lower eagerness asks for more certainty: a finished
sentence scores close to 1, while a pause between two words can score anything, so a stricter
cut-off cuts fewer sentences and still ends most turns early."""
_SEMANTIC_LEAD_MS = 500
"""Smart Turn hears the turn from this long before its speech started."""


class TurnDetector:
    """Speech starts after `min_speech_ms` above the threshold. It stops after `silence_ms` below
    it; or, with `semantic=True`, after a short pause if Smart Turn then calls the turn
    complete, else after the eagerness's longest silence (`silence_ms` is not used). A pause the
    model calls unfinished is no event: the turn goes on. Positions are milliseconds of audio fed so far.
    `feed` runs the models on the calling thread: call it from a worker thread, not an event loop.

    With `confirm_stops`, the first ask of a pause is the caller's to make, when it suits it: the
    pause comes last in `feed`'s events as a `pending` stop, the audio after it is held, and the
    caller asks Smart Turn about the speech before it (`judge`, on the same audio as at once) and
    any second opinion (the words it heard), then says with `confirm` whether the turn ended there,
    goes on (to be asked about again: `_next_ask`), or ends only should the pause last as long as
    a silence rule waits (`ends_after_ms`). (A server begins the answer
    in the pause: Smart Turn beside it on two cores slows both, and the turn end waits for that
    answer anyway.)"""

    def __init__(self, rate: int, models: TurnModels, *, threshold: float = 0.5, silence_ms: int = SILENCE_RULE_MS,
                 prefix_padding_ms: int = 300, min_speech_ms: int = 96,
                 semantic: bool = False, eagerness: str = "auto", confirm_stops: bool = False) -> None:
        if eagerness not in EAGERNESS:
            raise ValueError(f"eagerness must be one of {', '.join(EAGERNESS)}, got {eagerness!r}")
        self.vad = SileroVAD(rate, models.silero)
        self._smart_turn = models.smart_turn
        self.threshold = threshold
        self.silence_ms = silence_ms
        self.prefix_padding_ms = prefix_padding_ms
        self.min_speech_ms = min_speech_ms
        self.semantic = semantic
        self.confirm_stops = confirm_stops
        self.pause_ms = SEMANTIC_PAUSE_MS
        self.complete_at, self.max_silence_ms = EAGERNESS[eagerness].complete_at, EAGERNESS[eagerness].max_silence_ms
        self.speaking = False
        self.calls = 0
        """How many times Smart Turn was asked..."""
        self.last_probability: float | None = None
        """...and what it said the last time."""
        self._position_ms = 0
        self._run_ms = 0
        self._next_ask_ms = self.pause_ms
        self._ends_after_ms: int | None = None
        """The pause settled as a turn end only if it lasts this long (`confirm`); None: no such pause."""
        self._turn_from_ms = 0
        self._recent: deque[np.ndarray] = deque(maxlen=WINDOW_S * VAD_RATE // CHUNK)
        self._pending: TurnEvent | None = None
        self._held: list[tuple[np.ndarray, float]] = []
        self._asking = np.zeros(0, dtype=np.float32)
        """The speech Smart Turn is to judge for the pending stop."""
        if semantic:
            self._smart_turn.load()  # fail now, not at the first pause, when the model is missing

    def feed(self, samples: np.ndarray) -> list[TurnEvent]:
        """The turn events in `samples`; while a stop is pending, none: the audio is held for `confirm`."""
        if self._pending is not None:
            self._held += self.vad.chunks(samples)
            return []
        return self._hear(self.vad.chunks(samples))

    @property
    def resumed(self) -> bool:
        """A stop is pending and the voice came back in the audio held since (as long as starts a
        turn, so a click or a breath does not count): the pause was inside the turn."""
        return self._pending is not None and self._held_voice()[0]

    @property
    def resuming(self) -> bool:
        """A stop is pending and the audio held since ends in voice, too short yet to tell the
        voice coming back from a click or a breath."""
        return self._pending is not None and self._held_voice() == (False, True)

    def _held_voice(self) -> tuple[bool, bool]:
        """In the audio held: a voiced run as long as a turn start; whether it ends voiced."""
        needed, run = math.ceil(self.min_speech_ms / (CHUNK * 1000 / VAD_RATE)), 0
        for _, prob in list(self._held):  # (appended to by `feed` in another thread)
            run = run + 1 if prob >= self.threshold else 0
            if run >= needed:
                return True, True
        return False, run > 0

    def judge(self) -> float:
        """Smart Turn's probability that the turn was complete at the pending stop (CPU work, for a
        worker thread; it changes nothing here, so it may run beside `feed`)."""
        return self._smart_turn.completion_probability(self._asking)

    def confirm(self, ended: bool, probability: float | None = None, *, ends_after_ms: int | None = None) -> list[TurnEvent]:
        """Settle the pending stop: the turn ended there (with Smart Turn's `probability`), or
        (False) it goes on; with `ends_after_ms`, it ends after all should the silence last that
        long in all, as a silence rule would end it (the voice coming back first calls that off).
        Returns that stop if it stands, then the events of the audio held since, which may end with
        another pending stop or with the stop after that silence."""
        stop, self._pending = self._pending, None
        if stop is None:
            raise RuntimeError("no stop is pending")
        if probability is not None:
            self.last_probability = probability
        events = [replace(stop, probability=probability, pending=False)] if ended else []
        if not ended:
            self.speaking, self._run_ms = True, stop.silence_ms
            smart_turn_unsure = probability is None or probability < self.complete_at  # (not the words)
            self._next_ask_ms = self._next_ask(stop.silence_ms, before_rule=smart_turn_unsure and ends_after_ms is None)
            self._ends_after_ms = ends_after_ms
        held, self._held = self._held, []
        return events + self._hear(held)

    def _hear(self, chunks: list[tuple[np.ndarray, float]]) -> list[TurnEvent]:
        events = []
        step = CHUNK * 1000 // VAD_RATE
        for index, (chunk, prob) in enumerate(chunks):
            self._position_ms += step
            if self.semantic:
                self._recent.append(chunk)
            voiced = prob >= self.threshold if not self.speaking else prob >= self.threshold - 0.15
            if voiced != self.speaking:
                self._run_ms += step
                if self.speaking and self.semantic:
                    if (stop := self._semantic_stop()) is not None:
                        events.append(stop)
                        if stop.pending:
                            self._pending, self._held = stop, chunks[index + 1:]
                            return events
                    continue
                needed = self.min_speech_ms if not self.speaking else self.silence_ms
                if self._run_ms >= needed:
                    self.speaking = voiced
                    self._run_ms = 0
                    if voiced:
                        start = max(0, self._position_ms - self.min_speech_ms - self.prefix_padding_ms)
                        self._turn_from_ms = self._position_ms - self.min_speech_ms - _SEMANTIC_LEAD_MS
                        events.append(TurnEvent("started", start))
                    else:
                        events.append(TurnEvent("stopped", self._position_ms - self.silence_ms, self.silence_ms))
            else:
                self._run_ms = 0
                self._next_ask_ms, self._ends_after_ms = self.pause_ms, None
        return events

    @property
    def heard_ms(self) -> int:
        """How much audio was fed so far (whole VAD chunks)."""
        return self._position_ms

    @property
    def pause_heard_ms(self) -> int:
        """While a stop is pending: the silence heard since the speech before it, up to any voice
        held since (0 with none pending)."""
        if self._pending is None:
            return 0
        quiet = 0
        for _, prob in list(self._held):  # (appended to by `feed` in another thread)
            if prob >= self.threshold:
                break
            quiet += 1
        return self._pending.silence_ms + quiet * CHUNK * 1000 // VAD_RATE

    @property
    def ending_at_silence_rule(self) -> bool:
        """A pause is settled as the turn's end once its silence lasts as long as a silence rule
        waits, should the voice not come back first (`confirm`'s `ends_after_ms`, or Smart Turn
        asked before that rule's end)."""
        return self._ends_after_ms is not None

    @property
    def pending_stop(self) -> TurnEvent | None:
        """The stop waiting for `confirm` (its `ms`: where the speech before the pause ended)."""
        return self._pending

    @property
    def trailing_silence_ms(self) -> int:
        """While speaking: the silence heard since the last voiced chunk (a pause not yet a stop)."""
        return self._run_ms if self.speaking else 0

    def end_turn(self) -> None:
        """The turn was ended from outside (a client's commit or clear took it): whatever follows is
        a new turn, so the speech already committed is not stopped, and committed, a second time.
        A stop still pending is moot, and the audio held since was taken with the turn."""
        if self._pending is not None:
            self._position_ms += len(self._held) * CHUNK * 1000 // VAD_RATE
            self._pending, self._held = None, []
        self.speaking, self._run_ms, self._next_ask_ms, self._ends_after_ms = False, 0, self.pause_ms, None

    def _next_ask(self, asked_ms: int, before_rule: bool = True) -> int:
        """When Smart Turn is asked next in a pause it called unfinished at `asked_ms` of silence:
        every SEMANTIC_REASK_MS from the first ask, and with `before_rule` at SEMANTIC_BEFORE_RULE_MS
        in between (not where the words overruled Smart Turn, nor where the pause ends with the
        silence rule's already)."""
        regular = self.pause_ms + SEMANTIC_REASK_MS * ((asked_ms - self.pause_ms) // SEMANTIC_REASK_MS + 1)
        return SEMANTIC_BEFORE_RULE_MS if before_rule and asked_ms < SEMANTIC_BEFORE_RULE_MS < regular else regular

    def _semantic_stop(self) -> TurnEvent | None:
        """At each chunk of silence in a turn: a stop, or None while the turn goes on."""
        probability = None
        pending = self.confirm_stops and self._next_ask_ms == self.pause_ms
        if self._ends_after_ms is not None and self._run_ms >= self._ends_after_ms:
            probability, pending = self.last_probability, False
        elif self._run_ms >= self._next_ask_ms:
            asked_ms, self._next_ask_ms = self._run_ms, self._next_ask(self._run_ms)
            self.calls += 1
            chunks = min(len(self._recent), (self._position_ms - self._turn_from_ms) // (CHUNK * 1000 // VAD_RATE))
            speech = np.concatenate(list(self._recent)[-chunks:])
            if pending:
                self._asking = speech  # asked by the caller (`judge`)
            else:
                probability = self.last_probability = self._smart_turn.completion_probability(speech)
                if probability < self.complete_at and self._run_ms < self.max_silence_ms:
                    return None
                if self.pause_ms < asked_ms < SILENCE_RULE_MS:  # the ask before the silence rule's end
                    self._ends_after_ms = SILENCE_RULE_MS
                    return None
        elif self._run_ms < self.max_silence_ms:
            return None
        else:
            pending = False
        silence, self._run_ms, self._next_ask_ms, self.speaking = self._run_ms, 0, self.pause_ms, False
        self._ends_after_ms = None
        return TurnEvent("stopped", self._position_ms - silence, silence, probability, pending)
