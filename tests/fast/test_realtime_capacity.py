"""What a turn-based realtime session costs `omni serve`: past `--max-realtime-sessions` a new
one is refused at once (an `error` event, then close 1013) while the admitted ones go on; and a
closed session leaves nothing behind (no session, buffer or transcriber object survives it)."""

import asyncio
import base64
import gc

import numpy as np

from omnicli.server.app import create_app
from omnicli.session.turn_based import RealtimeSession
from omnicli.turns.early_transcript import EarlyTranscriber
from omnicli.turns.input_buffer import InputBuffer
from tests.fast.test_duplex_lane import SAFETY_S, Socket
from tests.helpers.models import TURN_MODELS
from tests.helpers.scripted import ScriptedEngine


def run(test, **options):
    async def main():
        app = create_app(ScriptedEngine(), preload=False, turn_models=TURN_MODELS, **options)
        return await asyncio.wait_for(test(app), SAFETY_S)

    return asyncio.run(main())


async def opened(app) -> Socket:
    socket = await Socket(app, query="").open()
    await socket.until("conversation.created")
    return socket


def test_a_session_over_the_limit_is_refused_at_once_and_the_admitted_ones_go_on():
    async def test(app):
        first, second = await opened(app), await opened(app)
        third = await Socket(app, query="").open()
        refusal = await third.recv()
        code = await third.closed()
        await first.send({"type": "session.update", "session": {"type": "realtime", "instructions": "Be brief."}})
        updated = await first.until("session.updated")
        await first.drop()
        fourth = await opened(app)  # a slot came free
        for socket in (second, fourth):
            await socket.drop()
        return refusal, code, third.close_reason, updated, app.state.realtime_slots.taken

    refusal, code, reason, updated, taken = run(test, max_realtime_sessions=2)
    assert refusal["type"] == "error"
    assert refusal["error"]["code"] == "realtime_session_busy"
    assert refusal["error"]["message"] == ("this server holds at most 2 realtime sessions at once "
                                           "(--max-realtime-sessions); try again later")
    assert (code, reason) == (1013, "realtime_session_busy")
    assert updated["session"]["instructions"] == "Be brief."
    assert taken == 0


def test_the_default_limit_is_two_sessions_a_core():
    import os

    async def test(app):
        return app.state.realtime_slots.limit

    assert run(test) == 2 * (os.cpu_count() or 1)


def test_a_closed_session_leaves_no_session_buffer_or_transcriber_behind():
    speech = base64.b64encode((np.sin(np.arange(24000 * 2) / 9) * 8000).astype("<i2").tobytes()).decode()

    async def test(app):
        for _ in range(3):
            socket = await opened(app)
            for _ in range(4):
                await socket.send({"type": "input_audio_buffer.append", "audio": speech})
            await socket.send({"type": "session.update", "session": {"type": "realtime"}})
            await socket.until("session.updated")
            await socket.drop()
        await asyncio.sleep(0.1)  # tasks the sessions cancelled finish

    run(test)
    gc.collect()
    left = [type(o).__name__ for o in gc.get_objects() if isinstance(o, (RealtimeSession, InputBuffer, EarlyTranscriber))]
    assert left == []


def test_closed_sockets_return_their_slots_even_when_dropped_mid_event():
    async def test(app):
        for _ in range(5):
            socket = await opened(app)
            await socket.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(b"\0\0" * 2400).decode()})
            await socket.drop()
        return app.state.realtime_slots.taken

    assert run(test, max_realtime_sessions=1) == 0


