"""`omni serve`'s duplex lane (`/v1/realtime?duplex=1`) through the real ASGI app over a scripted
engine, with sockets driven in memory at the ASGI level (so a test can drop one mid-answer), the
stand-in turn models (tests/helpers/models.py) hearing synthetic speech at 16 kHz. Assertions are on
events, their order and their `server_event_seq`, never on timings."""

import asyncio
import base64
import json

import numpy as np
import pytest

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import float_to_pcm16, resample
from omnicli.engine.base import ChatRequest
from omnicli.protocol.duplex import Capabilities
from omnicli.server.app import create_app
from omnicli.turns.models import TurnModels
from tests.helpers.clips import quiet
from tests.helpers.models import TURN_MODELS, LastWordCheck, LoudnessVAD, SurerAfterSilence
from tests.helpers.scripted import Hold, ScriptedEngine, SlowToBegin, answer, tone
from tests.helpers.synthetic_speech import QUESTION, UNFINISHED, paused, say, spoken

SAFETY_S = 30
"""Only so a broken test fails instead of hanging; never reached when the code works."""
ANSWER = answer("Paris is the capital.", " It is in France.", audio_seconds=4.0)


class Closed(Exception):
    pass


class Socket:
    """One client socket on `/v1/realtime?<query>`, spoken to at the ASGI level."""

    def __init__(self, app, query: str = "duplex=1") -> None:
        self.scope = {
            "type": "websocket", "asgi": {"version": "3.0"}, "http_version": "1.1", "scheme": "ws",
            "path": "/v1/realtime", "raw_path": b"/v1/realtime", "root_path": "", "query_string": query.encode(),
            "headers": [(b"host", b"omni.test")], "subprotocols": ["realtime"],
            "client": ("127.0.0.1", 1), "server": ("omni.test", 80),
        }
        self.app = app
        self._in: asyncio.Queue = asyncio.Queue()
        self._out: asyncio.Queue = asyncio.Queue()
        self.seen: list[dict] = []
        self.close_code: int | None = None
        self.close_reason: str | None = None
        self.task: asyncio.Task | None = None

    async def open(self) -> "Socket":
        await self._in.put({"type": "websocket.connect"})
        self.task = asyncio.create_task(self.app(self.scope, self._in.get, self._out.put))
        accept = await asyncio.wait_for(self._out.get(), SAFETY_S)
        assert accept["type"] == "websocket.accept"
        return self

    async def send(self, event: dict) -> None:
        await self._in.put({"type": "websocket.receive", "text": json.dumps(event)})

    async def stream(self, samples_24k: np.ndarray, rate: int = 16000, chunk_ms: int = 100) -> None:
        """Audio as a microphone would send it: `chunk_ms` appends of PCM16 at `rate`."""
        audio = resample(samples_24k, SPEECH_RATE, rate) if rate != SPEECH_RATE else samples_24k
        step = rate * chunk_ms // 1000
        for start in range(0, len(audio), step):
            await self.send({"type": "input_audio_buffer.append",
                             "audio": base64.b64encode(float_to_pcm16(audio[start:start + step])).decode()})

    async def recv(self) -> dict:
        message = await asyncio.wait_for(self._out.get(), SAFETY_S)
        if message["type"] == "websocket.close":
            self.close_code, self.close_reason = message.get("code", 1000), message.get("reason")
            await self._in.put({"type": "websocket.disconnect", "code": self.close_code})
            raise Closed(self.close_code)
        event = json.loads(message["text"])
        self.seen.append(event)
        return event

    async def until(self, *kinds: str) -> dict:
        while (event := await self.recv())["type"] not in kinds:
            pass
        return event

    async def closed(self) -> int:
        """Read to the server's close; its code."""
        try:
            while True:
                await self.recv()
        except Closed as closed:
            return closed.args[0]

    async def drop(self) -> None:
        """The network goes: no close frame, the server just loses the socket."""
        await self._in.put({"type": "websocket.disconnect", "code": 1006})
        assert self.task is not None
        await asyncio.wait_for(self.task, SAFETY_S)

    def kinds(self) -> list[str]:
        return [event["type"] for event in self.seen]


async def connect(app, session: dict | None = None, query: str = "duplex=1") -> tuple[Socket, dict]:
    socket = await Socket(app, query).open()
    await socket.send({"type": "session.update", "session": session or {}})
    created = await socket.until("session.created", "error")
    return socket, created


def run(test, engine: ScriptedEngine | None = None, **options):
    async def main():
        models = options.pop("turn_models", TURN_MODELS)
        app = create_app(engine or ScriptedEngine(chat=ANSWER), preload=False, turn_models=models, **options)
        try:
            return await asyncio.wait_for(test(app), 4 * SAFETY_S)
        finally:
            await app.state.duplex.aclose()

    return asyncio.run(main())


def seqs(events: list[dict]) -> list[int]:
    return [event["server_event_seq"] for event in events if "server_event_seq" in event]


# ---- the handshake ----------------------------------------------------------------------------

def test_session_created_advertises_the_lane_truthfully_and_every_event_is_numbered():
    async def test(app):
        socket, created = await connect(app, {"instructions": "Be brief.", "overlap_policy": "listen_only"})
        updated = await socket.until("session.updated")
        await socket.send({"type": "session.heartbeat"})
        ack = await socket.until("session.heartbeat_ack")
        return created, updated, ack, socket.seen

    created, updated, ack, seen = run(test)
    assert created["incarnation"] == 0 and created["attachment_generation"] == 1 and created["resume_token"].startswith("rt_")
    session = created["session"]
    capabilities = Capabilities.of(created)
    assert capabilities.implementation_level == "chat_fallback"
    assert capabilities.chunk_period_ms == 32
    assert capabilities.supports_session_resume and capabilities.supports_barge_in and capabilities.supports_audio_truncate
    assert capabilities.supports_input_append and capabilities.input_modes == ["append_audio_chunk", "turn_commit_only"]
    assert session["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 16000}
    assert session["instructions"] == "Be brief." and session["overlap_policy"] == "listen_only"
    assert session["playback_commit_policy"] == "commit_all_on_done" and session["epoch"] == 0
    assert session["turn_detection"]["type"] == "semantic_vad"
    assert updated["session"]["id"] == session["id"] and ack["session_id"] == session["id"]
    assert seqs(seen) == list(range(1, len(seen) + 1))


def test_a_bad_opening_update_is_refused_in_the_flat_shape_and_the_socket_closed():
    async def test(app):
        socket, error = await connect(app, {"playback_commit_policy": "sometimes"})
        return error, await socket.closed(), len(app.state.duplex.sessions)

    error, code, sessions = run(test)
    assert error["type"] == "error" and error["code"] == "invalid_value" and "playback_commit_policy" in error["error"]
    assert code == 1008 and sessions == 0


def test_a_voice_clip_is_refused_since_the_lane_cannot_clone_it_and_an_open_session_lives_on():
    """MiniCPM-o's preset sends `ref_audio`; this lane's voice is not cloned from a clip, so it says
    so instead of answering in another voice than the one asked for."""
    clip = "data:audio/wav;base64,UklGRiQAAABXQVZF"

    async def test(app):
        refused_socket, refused = await connect(app, {"ref_audio": clip, "sample_rate_hz": 16000})
        code = await refused_socket.closed()
        socket, created = await connect(app, {"instructions": "Be brief."})
        await socket.send({"type": "session.update", "session": {"ref_audio": clip, "instructions": "Be long."}})
        error = await socket.until("error")
        await socket.send({"type": "session.update", "session": {}})
        updated = await socket.until("session.updated")
        return refused, code, error, updated

    refused, code, error, updated = run(test)
    assert refused["type"] == "error" and refused["code"] == "ref_audio_unsupported" and code == 1008
    assert "cannot be cloned" in refused["error"]
    assert error["error"]["code"] == "ref_audio_unsupported" and error["error"]["param"] == "ref_audio"
    assert updated["session"]["instructions"] == "Be brief."  # nothing of the refused update was applied
    assert "ref_audio" not in updated["session"]


def test_autostart_0_opens_with_session_update_and_refuses_any_other_first_event():
    """vLLM-Omni's own client connects with `autostart=0` and opens with session.update; what
    `autostart=0` rules out is a session opened implicitly by some other first event."""
    async def test(app):
        opened, created = await connect(app, {"sample_rate_hz": 24000}, query="duplex=1&autostart=0&model=m")
        other = await Socket(app, "duplex=1&autostart=0").open()
        await other.send({"type": "input_audio_buffer.clear"})
        refused = await other.until("error")
        return created, refused, await other.closed(), len(app.state.duplex.sessions)

    created, refused, code, sessions = run(test)
    assert created["type"] == "session.created" and created["session"]["audio"]["input"]["sample_rate_hz"] == 24000
    assert refused["code"] == "session_not_open" and code == 1008 and sessions == 1


def test_the_session_cap_answers_duplex_session_busy_and_frees_the_slot_on_close():
    async def test(app):
        first, _ = await connect(app)
        second, busy = await connect(app)
        code = await second.closed()
        await first.send({"type": "session.close"})
        closed = await first.until("session.closed")
        third, created = await connect(app)
        return busy, (code, second.close_reason), closed, created

    busy, code, closed, created = run(test, max_duplex_sessions=1)
    assert busy["error"]["code"] == "duplex_session_busy" and busy["error"]["type"] == "rate_limit_error"
    assert "max_sessions=1" in busy["error"]["message"] and code == (1013, "duplex_session_busy")
    assert closed["reason"] == "session_close"
    assert created["type"] == "session.created"


# ---- turns ------------------------------------------------------------------------------------

@pytest.mark.parametrize("rate", [16000, 24000])
def test_a_spoken_question_is_answered_with_speak_before_the_audio(rate):
    engine = ScriptedEngine(chat=ANSWER)

    async def test(app):
        socket, _ = await connect(app, {"audio": {"input": {"format": {"type": "audio/pcm", "rate": rate}}}})
        await socket.stream(spoken(QUESTION), rate)
        await socket.until("response.done")
        await socket.until("rate_limits.updated")
        return socket.seen

    seen = run(test, engine)
    kinds = [event["type"] for event in seen]
    turn = kinds[kinds.index("input_audio_buffer.speech_started"):]
    assert turn[:7] == ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                        "conversation.item.added", "conversation.item.created", "input_audio_buffer.committed",
                        "conversation.item.input_audio_transcription.completed", "conversation.item.done"]
    answer_kinds = turn[turn.index("response.created"):]
    assert answer_kinds.index("response.speak") < answer_kinds.index("response.output_audio.delta")
    assert answer_kinds.count("response.speak") == 1
    deltas = [i for i, kind in enumerate(answer_kinds) if kind == "response.output_audio.delta"]
    assert len(deltas) == 2 and all(answer_kinds[i + 1] == "response.output_audio_transcript.delta" for i in deltas)
    done = seen[kinds.index("response.done")]
    assert done["response"]["status"] == "completed" and done["response_id"] == done["response"]["id"]
    assert done["response"]["metadata"]["playback"]["generated_ms"] == 4000
    assert "response.listen" not in kinds and len(engine.requests) >= 1
    assert seqs(seen) == list(range(1, len(seen) + 1))



def test_with_auto_response_off_a_turn_the_server_ends_is_committed_and_answered_only_when_asked():
    """`extra_body.auto_response: false`: the client asks for each answer (`response.create`), so
    a turn end the server heard commits the turn and starts no answer of its own."""
    engine = ScriptedEngine(chat=ANSWER)

    async def test(app):
        socket, created = await connect(app, {"extra_body": {"auto_response": False}})
        await socket.stream(spoken(QUESTION))
        await socket.until("conversation.item.done")
        await socket.send({"type": "response.create"})
        await socket.until("response.done")
        return created, socket.seen

    created, seen = run(test, engine)
    kinds = [event["type"] for event in seen]
    assert created["session"]["extra_body"]["auto_response"] is False
    assert kinds.count("input_audio_buffer.committed") == 1 and "error" not in kinds
    assert kinds.count("response.created") == 1
    assert len([r for r in engine.requests if isinstance(r, ChatRequest)]) == 1
    assert seen[kinds.index("response.done")]["response"]["status"] == "completed"

def test_a_turn_heard_before_its_end_is_offered_as_the_request_its_answer_makes_and_the_answer_begun():
    """As in the turn-based session: with one talker the engine may begin the answer in the pause,
    and the answer then makes the very request it was offered, so it takes over what was begun."""
    engine = ScriptedEngine(chat=ANSWER)

    async def test(app):
        socket, _ = await connect(app)
        await socket.stream(spoken(QUESTION))
        await socket.until("response.done")

    run(test, engine)
    (asked,) = [r for r in engine.requests if isinstance(r, ChatRequest)]
    assert engine.prepared and engine.prepared[-1].messages == asked.messages
    assert (engine.prepared[-1].max_tokens, engine.prepared[-1].voice) == (asked.max_tokens, asked.voice)
    assert engine.began_answers[-1] is True

def test_a_pause_that_is_not_a_turn_end_is_answered_with_listen_and_one_answer_follows():
    async def test(app):
        socket, _ = await connect(app)
        await socket.stream(paused(*UNFINISHED, pause_s=0.6))
        await socket.until("response.done")
        return socket.kinds()

    kinds = run(test)
    assert "response.listen" in kinds
    assert kinds.index("response.listen") < kinds.index("input_audio_buffer.speech_stopped")
    assert kinds.count("response.created") == 1 and kinds.count("input_audio_buffer.committed") == 1


def test_a_pause_smart_turn_hears_finished_only_before_the_silence_rules_end_is_answered_with_listen_once():
    """Unsure at its first ask, Smart Turn hears the question finished at its ask before 500 ms of
    silence: the turn ends there, and that ask is no second pause judged unfinished."""
    models = TurnModels(silero=LoudnessVAD(), smart_turn=SurerAfterSilence(), words=LastWordCheck())

    async def test(app):
        socket, _ = await connect(app)
        await socket.stream(spoken(QUESTION, tail_s=1.5))
        await socket.until("response.done")
        return socket.kinds()

    kinds = run(test, turn_models=models)
    assert kinds.count("response.listen") == 1
    assert kinds.index("response.listen") < kinds.index("input_audio_buffer.speech_stopped")
    assert kinds.count("input_audio_buffer.committed") == 1 and kinds.count("response.created") == 1


@pytest.mark.parametrize("heard, begin_s, wait_s", [
    ("What is the capital of", 0.0, 1.0),  # the words overrule (the follow-up comes after they are read)
    ("What is the capital of France?", 1.0, 0.0),  # the voice comes back before the answer is begun
])
def test_a_turn_end_the_words_or_the_voice_coming_back_overrule_is_answered_with_listen_and_the_turn_goes_on(heard, begin_s, wait_s):
    """Smart Turn calls the question finished at the 400 ms pause, but the transcript (scripted) does
    not read finished, or it does and the follow-up comes while the answer begun on it is not ready:
    the pause is one inside the turn, which is answered once."""
    engine = SlowToBegin(begin_s, chat=ANSWER, transcripts=[heard])
    audio = paused(QUESTION, "What is the capital of Spain?", pause_s=0.4)
    resumes = int(1.4 * SPEECH_RATE) + len(say(QUESTION))

    async def test(app):
        socket, _ = await connect(app)
        await socket.stream(audio[:resumes])
        await asyncio.sleep(wait_s)
        await socket.stream(audio[resumes:])
        await socket.until("response.done")
        return socket.kinds()

    kinds = run(test, engine)
    assert "response.listen" in kinds
    assert kinds.index("response.listen") < kinds.index("input_audio_buffer.speech_stopped")
    assert kinds.count("input_audio_buffer.committed") == 1 and kinds.count("response.created") == 1


def test_a_commit_that_leaves_it_to_the_server_listens_to_silence_and_answers_a_finished_question():
    async def test(app):
        socket, _ = await connect(app, {"turn_detection": {"type": "server_vad", "silence_duration_ms": 5000}})
        await socket.stream(quiet(0.5))
        await socket.send({"type": "input_audio_buffer.commit", "create_response": False})
        listen = await socket.until("response.listen")
        await socket.stream(np.concatenate([quiet(0.5), say(QUESTION), quiet(0.5)]))
        await socket.send({"type": "input_audio_buffer.commit", "create_response": False})
        await socket.until("response.done")
        return listen, socket.kinds()

    listen, kinds = run(test)
    assert listen["response"]["metadata"]["reason"] == "no_speech"
    assert kinds.count("input_audio_buffer.committed") == 1 and kinds.count("response.created") == 1


def test_a_client_commit_ends_the_turn_the_server_was_still_in_and_its_tail_is_not_a_second_turn():
    async def test(app):
        socket, _ = await connect(app, {"turn_detection": {"type": "server_vad", "silence_duration_ms": 1500}})
        await socket.stream(np.concatenate([quiet(0.3), say(QUESTION), quiet(0.5)]))
        await socket.send({"type": "input_audio_buffer.commit", "create_response": False})  # before the server's 1.5 s
        await socket.until("response.done")
        await socket.stream(quiet(2.5))  # the server's own silence rule would end that turn again in here
        await socket.send({"type": "session.heartbeat"})
        await socket.until("session.heartbeat_ack")  # events are carried out in order: every append is heard
        return socket.kinds()

    kinds = run(test)
    assert kinds.count("input_audio_buffer.committed") == 1 and kinds.count("response.created") == 1


# ---- typed input (input.text.append) ----------------------------------------------------------

def user_items(seen: list[dict]) -> list[dict]:
    return [e["item"] for e in seen if e["type"] == "conversation.item.done" and e["item"]["role"] == "user"]


def asked(engine: ScriptedEngine) -> list[str]:
    """The user's last message in each chat request the engine was given."""
    return [r.messages[-1].text for r in engine.requests if isinstance(r, ChatRequest)]


def test_text_typed_while_speaking_joins_the_spoken_turn():
    engine = ScriptedEngine(chat=ANSWER, transcripts=["What is the capital of France?"])

    async def test(app):
        socket, _ = await connect(app)
        await socket.send({"type": "input.text.append", "text": "and "})
        await socket.send({"type": "push_text", "text": "its population?"})  # vLLM-Omni's alias
        await socket.stream(spoken(QUESTION))
        await socket.until("response.done")
        return socket.seen

    seen = run(test, engine)
    [item] = user_items(seen)
    assert item["content"] == [{"type": "input_audio", "transcript": "What is the capital of France?"},
                               {"type": "input_text", "text": "and its population?"}]
    assert asked(engine) == ["What is the capital of France?\nand its population?"]


def test_a_typed_turn_is_committed_and_answered_without_speech():
    engine = ScriptedEngine(chat=ANSWER)

    async def test(app):
        socket, _ = await connect(app)
        await socket.stream(quiet(0.3))
        await socket.send({"type": "input.text.append", "text": "What is the capital of France?"})
        await socket.send({"type": "input_audio_buffer.commit", "create_response": False})
        await socket.until("response.done")
        return socket.seen

    seen = run(test, engine)
    [item] = user_items(seen)
    assert item["content"] == [{"type": "input_text", "text": "What is the capital of France?"}]
    assert asked(engine) == ["What is the capital of France?"]
    assert "response.listen" not in [e["type"] for e in seen]


def test_empty_typed_text_is_refused_and_a_cancelled_input_drops_what_was_typed():
    engine = ScriptedEngine(chat=ANSWER, transcripts=["What is the capital of France?"])

    async def test(app):
        socket, _ = await connect(app)
        await socket.send({"type": "input.text.append", "text": "  "})
        error = await socket.until("error")
        await socket.send({"type": "input.text.append", "text": "never mind"})
        await socket.send({"type": "input.cancel"})
        await socket.until("input_audio_buffer.cleared")
        await socket.stream(spoken(QUESTION))
        await socket.until("response.done")
        return error, socket.seen

    error, seen = run(test, engine)
    assert (error["error"]["code"], error["error"]["param"]) == ("invalid_event", "text")
    [item] = user_items(seen)
    assert [part["type"] for part in item["content"]] == ["input_audio"]
    assert asked(engine) == ["What is the capital of France?"]


# ---- overlap ----------------------------------------------------------------------------------

@pytest.mark.parametrize("client_commits", [False, True], ids=["server-ends-it", "client-commits-first"])
def test_a_backchannel_while_the_assistant_speaks_is_dropped_and_does_not_interrupt(client_commits):
    """"Uh-huh" over the answer is dropped, whoever ends it: the lane's own turn detection, or
    `omni talk --duplex` committing at its 500 ms pause (`create_response: false`: the model
    decides) before Smart Turn has ended the remark here. Its silence is no second turn either."""
    hold = Hold()
    engine = ScriptedEngine(chat=[hold, *ANSWER])

    async def test(app):
        socket, _ = await connect(app)
        await socket.stream(spoken(QUESTION))
        await socket.until("response.created")
        await socket.stream(np.concatenate([quiet(0.3), say("Uh-huh."), quiet(0.5)]))
        if client_commits:
            await socket.send({"type": "input_audio_buffer.commit", "create_response": False})
        await socket.stream(quiet(2.0))
        decision = await socket.until("overlap.decision")
        hold.open()
        done = await socket.until("response.done")
        await socket.send({"type": "session.heartbeat"})
        await socket.until("session.heartbeat_ack")  # every append before it was heard
        return decision, done, socket.kinds()

    decision, done, kinds = run(test, engine)
    assert decision["action"] == "drop" and decision["reason"] == "backchannel" and decision["policy"] == "barge_in_on_speech"
    assert decision["overlap_ms"] < 700
    assert done["response"]["status"] == "completed" and "error" not in kinds
    assert kinds.count("input_audio_buffer.committed") == 1 and kinds.count("response.created") == 1
    assert kinds.count("overlap.decision") == 1 and "output_audio_buffer.cleared" not in kinds


def test_sustained_speech_barges_in_and_a_truncating_ack_trims_the_history():
    hold = Hold()
    first = [*answer("Paris is the capital.", audio_seconds=2.0)[:-1], hold, AudioDelta_(" It is in France.", 2.0),
             answer("x")[-1]]
    asked: list = []

    def script(request):
        asked.append(request)
        return first if len(asked) == 1 else answer("Sure.", audio_seconds=1.0)

    engine = ScriptedEngine(chat=script)

    async def test(app):
        socket, created = await connect(app)
        await socket.stream(spoken(QUESTION))
        await socket.until("response.output_audio.delta")
        answer_id = socket.seen[-1]["response_id"]
        item_id = socket.seen[-1]["item_id"]
        await socket.stream(np.concatenate([quiet(0.2), say("I would rather hear about the capital of Germany"), quiet(2.5)]))
        decision = await socket.until("overlap.decision")
        cleared = await socket.until("output_audio_buffer.cleared")
        cancelled = await socket.until("response.done")
        await socket.send({"type": "playback.ack", "response_id": answer_id, "played_ms": 1500, "truncate": True})
        acknowledged = await socket.until("playback.acknowledged")
        dones = [e for e in socket.seen if e["type"] == "response.done"]
        second = dones[1] if len(dones) > 1 else await socket.until("response.done")
        await socket.send({"type": "conversation.item.retrieve", "item_id": item_id})
        stored = await socket.until("conversation.item.retrieved")
        hold.open()
        return answer_id, decision, cleared, cancelled, acknowledged, second, stored

    answer_id, decision, cleared, cancelled, acknowledged, second, stored = run(test, engine)
    assert decision["action"] == "barge_in" and decision["overlap_ms"] >= 1200
    assert cleared["response_id"] == answer_id
    assert cancelled["response_id"] == answer_id and cancelled["response"]["status"] == "cancelled"
    assert cancelled["response"]["status_details"]["reason"] == "barge_in"
    assert cancelled["response"]["metadata"]["epoch"] == decision["epoch"] + 1
    ack = acknowledged["event"]
    assert ack["played_ms"] == 1500 and ack["committed_ms"] == 1500 and ack["truncate"] and ack["history_committed"]
    assert ack["playback"]["generated_ms"] == 2000
    assert stored["item"]["content"][0]["transcript"] == "Paris is the"  # 1.5 s of a 2 s sentence of four words
    assert second["response"]["status"] == "completed" and second["response_id"] != answer_id


def AudioDelta_(text: str, seconds: float):  # noqa: N802 - reads as the delta it makes
    from omnicli.engine.base import AudioDelta

    return AudioDelta(tone(seconds, text))


# ---- playback truth ---------------------------------------------------------------------------

def test_ack_only_keeps_in_history_only_what_was_played():
    engine = ScriptedEngine(chat=answer("One two three four.", " Five six.", audio_seconds=4.0))

    async def test(app):
        socket, _ = await connect(app, {"playback_commit_policy": "ack_only"})
        await socket.stream(spoken(QUESTION))
        done = await socket.until("response.done")
        item_id = done["response"]["output"][0]["id"]
        acks = []
        for played in (1000, 500, 2000):  # cumulative: a lower position never moves it back
            await socket.send({"type": "playback.ack", "item_id": item_id, "played_ms": played})
            acks.append((await socket.until("playback.acknowledged"))["event"])
        await socket.send({"type": "conversation.item.retrieve", "item_id": item_id})
        stored = await socket.until("conversation.item.retrieved")
        return done, acks, stored

    done, acks, stored = run(test, engine)
    assert done["response"]["metadata"]["committed"] is False
    assert [a["played_ms"] for a in acks] == [1000, 1000, 2000]
    assert [a["history_committed"] for a in acks] == [False, False, False]
    assert stored["item"]["content"][0]["transcript"] == "One two three four."


# ---- session life -----------------------------------------------------------------------------

def test_a_socket_dropped_mid_answer_resumes_with_no_event_lost_or_doubled():
    hold = Hold()
    engine = ScriptedEngine(chat=[*answer("Paris is the capital.", audio_seconds=1.0)[:-1], hold,
                                  AudioDelta_(" It is in France.", 1.0), answer("x")[-1]])

    async def test(app):
        socket, created = await connect(app)
        await socket.stream(spoken(QUESTION))
        await socket.until("response.output_audio.delta")
        last = socket.seen[-1]["server_event_seq"]
        await socket.drop()  # some events after `last` may be on their way; the client never read them
        hold.open()  # the answer goes on while nobody is attached
        session_id = created["session"]["id"]
        again = await Socket(app, "duplex=1&autostart=0").open()
        await again.send({"type": "session.resume", "session_id": session_id, "resume_token": created["resume_token"],
                          "incarnation": 0, "last_received_server_event_seq": last})
        resumed = await again.until("session.resumed")
        await again.until("rate_limits.updated")
        await again.send({"type": "session.heartbeat"})
        await again.until("session.heartbeat_ack")
        return created, socket.seen, resumed, again.seen

    created, before, resumed, after = run(test, engine)
    assert resumed["attachment_generation"] == 2 and resumed["resume_token"] != created["resume_token"]
    assert "server_event_seq" not in resumed
    replayed = after[1:]
    numbers = seqs(before) + seqs(replayed)
    assert numbers == list(range(1, len(numbers) + 1))  # none lost, none twice, in order
    kinds = [e["type"] for e in before + replayed]
    assert kinds.count("response.done") == 1 and kinds.count("response.output_audio.delta") == 2
    assert kinds[-1] == "session.heartbeat_ack"


def test_a_second_attach_replaces_the_first_and_bad_resumes_are_refused_flat():
    async def test(app):
        first, created = await connect(app)
        session_id, token = created["session"]["id"], created["resume_token"]
        results = {}
        for name, event in {
            "unknown": {"session_id": "sess_nobody", "resume_token": token, "incarnation": 0, "last_received_server_event_seq": 0},
            "bad_token": {"session_id": session_id, "resume_token": "rt_wrong", "incarnation": 0, "last_received_server_event_seq": 0},
            "ahead": {"session_id": session_id, "resume_token": token, "incarnation": 0, "last_received_server_event_seq": 999},
        }.items():
            probe = await Socket(app, "duplex=1&autostart=0").open()
            await probe.send({"type": "session.resume", **event})
            results[name] = (await probe.recv(), await probe.closed())
            if name != "ahead":
                assert session_id in app.state.duplex.sessions
        return results, app.state.duplex.sessions

    results, sessions = run(test)
    assert results["unknown"][0] == {"type": "error", "error": "Unknown or expired duplex session: sess_nobody",
                                     "code": "session_resume_expired"}
    assert results["bad_token"][0]["code"] == "session_resume_invalid" and isinstance(results["bad_token"][0]["error"], str)
    assert results["ahead"][0] == {"type": "session.resync_required", "session_id": results["ahead"][0]["session_id"],
                                   "reason": "journal_gap"}
    assert all(code == 1008 for _, code in results.values())
    assert sessions == {}  # a session that needs a resync is over


def test_a_resume_on_a_second_socket_replaces_the_first():
    async def test(app):
        first, created = await connect(app)
        await first.until("session.updated")
        second = await Socket(app, "duplex=1&autostart=0").open()
        await second.send({"type": "session.resume", "session_id": created["session"]["id"],
                           "resume_token": created["resume_token"], "incarnation": 0, "last_received_server_event_seq": 2})
        resumed = await second.until("session.resumed")
        replaced = await first.until("session.replaced")
        code = await first.closed()
        await second.send({"type": "session.heartbeat"})
        return resumed, replaced, code, await second.until("session.heartbeat_ack")

    resumed, replaced, code, ack = run(test)
    assert replaced["attachment_generation"] == 1 and resumed["attachment_generation"] == 2
    assert code == 4000 and ack["server_event_seq"] == 3


def test_without_heartbeats_the_lease_expires():
    async def test(app):
        socket, created = await connect(app, {"idle_timeout_s": 0.5})
        expired = await socket.until("session.expired")
        return expired, await socket.closed(), app.state.duplex.sessions

    expired, code, sessions = run(test)
    assert expired["reason"] == "idle_ttl_expired" and expired["incarnation"] == 0
    assert code == 1000 and sessions == {}


def test_a_dropped_session_expires_after_the_grace_and_cannot_be_resumed():
    async def test(app):
        socket, created = await connect(app)
        await socket.drop()
        while app.state.duplex.sessions:
            await asyncio.sleep(0.01)
        again = await Socket(app, "duplex=1&autostart=0").open()
        await again.send({"type": "session.resume", "session_id": created["session"]["id"],
                          "resume_token": created["resume_token"], "incarnation": 0, "last_received_server_event_seq": 2})
        return await again.recv()

    error = run(test, duplex_grace_s=0.2)
    assert error["code"] == "session_resume_expired"


def test_under_listen_only_long_overlap_is_deferred_and_answered_after_the_answer():
    hold = Hold()
    asked: list = []

    def script(request):
        asked.append(request)
        return [hold, *ANSWER] if len(asked) == 1 else answer("Berlin.", audio_seconds=1.0)

    async def test(app):
        socket, _ = await connect(app, {"overlap_policy": "listen_only"})
        await socket.stream(spoken(QUESTION))
        await socket.until("response.created")
        await socket.stream(np.concatenate([quiet(0.2), say("I would rather hear about the capital of Germany"), quiet(2.5)]))
        decision = await socket.until("overlap.decision")
        committed = await socket.until("input_audio_buffer.committed")
        hold.open()
        first = await socket.until("response.done")
        second = await socket.until("response.done")
        return decision, committed, first, second, socket.kinds()

    decision, committed, first, second, kinds = run(test, ScriptedEngine(chat=script))
    assert decision["action"] == "listen" and decision["reason"] == "overlap_deferred" and decision["policy"] == "listen_only"
    assert decision["overlap_ms"] >= 1200  # long, and still no barge-in
    assert committed["event"]["response_create_deferred"] is True
    assert first["response"]["status"] == "completed" and second["response"]["status"] == "completed"
    assert "output_audio_buffer.cleared" not in kinds


def test_a_client_forced_barge_in_cancels_and_advances_the_epoch():
    hold = Hold()

    async def test(app):
        socket, created = await connect(app)
        await socket.stream(spoken(QUESTION))
        started = await socket.until("response.created")
        await socket.send({"type": "turn.signal", "event": "barge_in", "payload": {"source": "client_vad"}})
        decision = await socket.until("overlap.decision")
        cleared = await socket.until("output_audio_buffer.cleared")
        done = await socket.until("response.done")
        await socket.send({"type": "input_audio_buffer.clear"})
        await socket.until("input_audio_buffer.cleared")
        await socket.send({"type": "session.update", "session": {}})
        updated = await socket.until("session.updated")
        hold.open()
        return started, decision, cleared, done, updated

    started, decision, cleared, done, updated = run(test, ScriptedEngine(chat=[hold, *ANSWER]))
    assert decision["action"] == "barge_in" and decision["reason"] == "client_signal"
    assert cleared["response_id"] == done["response_id"] == started["response_id"]
    assert done["response"]["status_details"]["reason"] == "barge_in"
    assert updated["session"]["epoch"] == 2  # the barge-in, then the clear


def test_a_client_commit_after_the_server_ended_the_turn_itself_changes_nothing():
    hold = Hold()

    async def test(app):
        socket, _ = await connect(app)
        await socket.stream(spoken(QUESTION))
        await socket.until("response.created")
        await socket.send({"type": "input_audio_buffer.commit", "response_create": False, "final": True})
        await socket.send({"type": "session.heartbeat"})
        await socket.until("session.heartbeat_ack")
        hold.open()
        await socket.until("response.done")
        return socket.kinds()

    kinds = run(test, ScriptedEngine(chat=[hold, *ANSWER]))
    assert "response.listen" not in kinds and "error" not in kinds
    assert kinds.count("input_audio_buffer.committed") == 1 and kinds.count("response.created") == 1


def test_speech_over_an_answer_still_playing_barges_in_and_the_ack_trims_it():
    engine = ScriptedEngine(chat=lambda request: answer("A very long answer.", audio_seconds=60.0))

    async def test(app):
        socket, _ = await connect(app)
        await socket.stream(spoken(QUESTION))
        done = await socket.until("response.done")  # generated whole; the client plays it for a minute
        await socket.stream(np.concatenate([quiet(0.2), say("I would rather hear about the capital of Germany"), quiet(2.5)]))
        decision = await socket.until("overlap.decision")
        cleared = await socket.until("output_audio_buffer.cleared")
        await socket.send({"type": "playback.ack", "response_id": done["response_id"], "played_ms": 30000, "truncate": True})
        acknowledged = await socket.until("playback.acknowledged")
        await socket.send({"type": "conversation.item.retrieve", "item_id": done["response"]["output"][0]["id"]})
        stored = await socket.until("conversation.item.retrieved")
        while socket.kinds().count("response.created") < 2:  # the user's new turn is answered
            await socket.recv()
        return done, decision, cleared, acknowledged, stored, socket.seen

    done, decision, cleared, acknowledged, stored, seen = run(test, engine)
    assert done["response"]["status"] == "completed" and done["response"]["metadata"]["committed"] is True
    assert decision["action"] == "barge_in" and cleared["response_id"] == done["response_id"]
    statuses = [e["response"]["status"] for e in seen if e["type"] == "response.done"]
    assert "cancelled" not in statuses  # nothing left to cancel: it was only still playing
    assert acknowledged["event"]["committed_ms"] == 30000 and acknowledged["event"]["playback"]["generated_ms"] == 60000
    assert stored["item"]["content"][0]["transcript"] == "A very"  # half of a four-word sentence
