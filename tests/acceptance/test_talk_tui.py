"""`omni talk` as a person uses it: a real terminal (a pseudo-terminal, rendered by pyte), the
embedded engine, and PulseAudio's pipe microphone and speaker. Push-to-talk with the Space key:
the models load before anything is heard, the meter and timer move while the question is spoken,
the answer is `speaking` while the speaker plays it, and what was said stays after q."""

import os
import re
import sys
import time

import numpy as np

from tests.acceptance.test_embedded_voice import synthesize
from tests.helpers.pty_screen import Terminal
from tests.helpers.pulse import RATE as PULSE_RATE
from tests.helpers.speech_check import trim_silence, wer
from tests.helpers.talk_harness import borders, meter, recorded, status

QUESTION = "How many days are there in a week?"


def at_48k(samples: np.ndarray) -> np.ndarray:
    import soxr

    return soxr.resample(samples, 24000, PULSE_RATE).astype(np.float32)


def test_push_to_talk_with_space_on_a_terminal(pulse, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "OMNI_SERVER", "OPENAI_BASE_URL")}
    env.update({"OMNI_CONFIG": "/nonexistent/omni.toml", "TERM": "xterm-256color", **pulse.env})
    question = synthesize(QUESTION)
    term = Terminal([sys.executable, "-m", "omnicli", "talk", "--llm", "smollm2",
                     "--instructions", "Answer in one short sentence."], env, rows=30, cols=100)
    try:
        term.wait_for(lambda t: status(t) == "loading models…", "loading models…")
        term.wait_for(lambda t: status(t) == "press Space to talk", "the idle state, once the session is ready")
        # The pipe microphone first delivers, in one burst, the silence it held while nobody
        # recorded (as in test_talk.py): let it pass, so the timer then counts the question.
        time.sleep(1.0)
        pulse.take_speaker()
        term.press(b" ")
        term.wait_for(lambda t: status(t) == "hearing you", "hearing you")
        start = recorded(term)
        pulse.speak_into_microphone(at_48k(question))
        term.wait_for(lambda t: meter(t) >= 8, "the meter moving with the question")
        term.wait_for(lambda t: recorded(t) >= start + len(question) / 24000 + 1.0, "the whole question recorded")
        term.press(b" ")
        term.wait_for(lambda t: status(t) == "speaking", "speaking")
        term.wait_for(lambda t: status(t) == "press Space to talk" and t.line_with(r"^omni: "), "the answer played out")
        you = term.line_with(r"^you: ")
        assert you is not None and wer(QUESTION, you.removeprefix("you:").strip()) < 0.35, you
        term.wait_for(lambda t: t.line_with(r"first audio \d+\.\d\d s from key press"), "the turn's wait")
        assert borders(term) == 1
        term.press(b"q")
        assert term.wait_exit() == 0
        assert term.modes() == (True, True)  # the terminal's own settings are back
    finally:
        term.close()
    lines = term.lines()
    said = [line for line in lines if line.startswith(("you:", "omni:"))]
    assert len(said) == 2 and said[0] == you and len(said[1]) > len("omni: ")
    assert re.fullmatch(r"omni talk: 1 turn answered, median \d+ ms from key press to first audio", lines[-1])
    assert borders(term) == 0
    assert len(trim_silence(pulse.take_speaker())) / PULSE_RATE > 0.5  # the answer reached the speaker
