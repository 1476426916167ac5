"""`omni talk` on a real pseudo-terminal, the screen rendered by a terminal emulator (pyte): what a
person sees. Keys act at once without echo (no stale panel borders), the states follow what
happens, the meter moves and the timer runs while a turn is recorded, a silent turn is "not
caught", an interrupted answer is marked at the cut, the transcript stays in the scrollback after
exit, and the terminal's settings come back on q, Ctrl-C and errors.

Push-to-talk runs `converse` (the terminal half of `omni talk`) with a voice that keeps talking and
a speaker that plays in real time; VAD and errors run the real `omni` app with a scripted engine
(talk_screen_runner.py)."""

import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from omnicli.talk import state as states
from tests.helpers.cli_harness import CLEAN_ENV
from tests.helpers.pty_screen import Terminal
from tests.helpers.realtime_harness import silence
from tests.helpers.talk_harness import borders, meter, recorded, status
from tests.helpers.turn_speech import speech, speech_file

ROOT = Path(__file__).resolve().parents[2]
RUNNER = str(ROOT / "tests" / "helpers" / "talk_screen_runner.py")


@pytest.fixture
def talk(tmp_path):
    started: list[Terminal] = []

    def start(*args: str, gate: Path | None = None, stderr: Path | None = None) -> Terminal:
        """`stderr`: the program's stderr redirected to this file, as `omni talk 2> FILE` does."""
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env.update({k: v for k, v in CLEAN_ENV.items() if v is not None}, TERM="xterm-256color",
                   PYTHONPATH=str(ROOT))
        for key in (k for k, v in CLEAN_ENV.items() if v is None):
            env.pop(key, None)
        if gate is not None:
            env["OMNI_TEST_GATE"] = str(gate)
        argv = [sys.executable, RUNNER, *args]
        if stderr is not None:
            argv = ["/bin/sh", "-c", 'exec "$@" 2>"$0"', str(stderr), *argv]
        started.append(Terminal(argv, env, rows=30, cols=100))
        return started[-1]

    yield start
    for terminal in started:
        terminal.close()


def test_push_to_talk_on_a_terminal(talk, tmp_path):
    gate = tmp_path / "loaded"
    term = talk("ptt", "noon", str(speech_file()), gate=gate)
    term.wait_for(lambda t: status(t) == "loading models…", "loading models…")
    term.press(b" ")  # while loading: nothing happens
    gate.touch()
    term.wait_for(lambda t: status(t) == "press Space to talk", "the idle state")
    term.wait_for("Space talk · Esc interrupt · m mute · q quit", "the keys under the panel")
    term.press(b" ")
    term.wait_for(lambda t: status(t) == "hearing you", "hearing you")
    term.wait_for(lambda t: meter(t) >= 8, "the meter moving with the voice")
    term.wait_for(lambda t: recorded(t) >= 1.5, "the recording timer")
    term.press(b" ")
    term.wait_for(lambda t: status(t) == "speaking", "speaking")
    term.wait_for(lambda t: t.line_with(r"^you:  what I said$"), "the user's words")
    term.wait_for(lambda t: status(t) == "press Space to talk", "idle again once the answer played out")
    term.wait_for(lambda t: t.line_with(r"^omni: "), "the answer's line")
    answer = term.line_with(r"^omni: ")
    assert re.fullmatch(r"omni: It is noon\. +\d+\.\d\d s", answer)
    term.wait_for(lambda t: t.line_with(r"first audio \d+\.\d\d s from key press"), "the turn's wait")
    term.wait_for(lambda t: t.line_with(r"ASR (\d+\.\d\d s|heard early) · thinker \d+\.\d\d s · talker \d+\.\d\d s · "
                                        r"playback \d+\.\d\d s"), "its stages")  # heard early: in a pause of the voice
    for key in (b"m", b"m", b"x", b"m"):  # muted, unmuted, a key that means nothing, muted
        term.press(key)
    term.wait_for(lambda t: status(t) == "muted" and "mic  muted" in t.text(), "muted")
    term.press(b"m")
    term.wait_for(lambda t: status(t) == "press Space to talk" and "mic  ░" in t.text(), "unmuted")
    # One panel, drawn whole: a key echoed under it would have left a stale copy above (a wait that never ends).
    term.wait_for(lambda t: borders(t) == 1 and "q quit" in t.text(), "one whole panel")
    assert "^[" not in term.text() and " m\n" not in term.text()  # nor an echoed key
    term.press(b"q")
    assert term.wait_exit() == 0
    lines = term.lines()
    assert borders(term) == 0  # the panel is gone; the conversation stays
    assert [line for line in lines if line.startswith(("you:", "omni:"))] == ["you:  what I said", answer]
    assert re.fullmatch(r"omni talk: 1 turn answered, median \d+ ms from key press to first audio", lines[-1])
    assert term.modes() == (True, True)


def test_a_silent_turn_is_not_caught_and_not_answered(talk):
    term = talk("ptt", "noon", "silence")
    term.wait_for(lambda t: status(t) == "press Space to talk", "the idle state")
    term.press(b" ")
    term.wait_for(lambda t: recorded(t) >= 1.0, "the recording timer")
    assert meter(term) == 0
    term.press(b"\r")  # Enter sends a turn too
    term.wait_for(lambda t: "didn't catch that" in t.text() and status(t) == "press Space to talk", "the turn dropped")
    term.wait_for(lambda t: "didn't catch that" not in t.text(), "the word gone once all was quiet a while")
    term.press(b" ")
    term.wait_for(lambda t: recorded(t) >= 0.5, "the recording timer")
    term.press(b" ")
    term.wait_for(lambda t: "didn't catch that" in t.text(), "the word again")
    term.press(b"m")
    term.wait_for(lambda t: status(t) == "muted" and "didn't catch that" not in t.text(), "the word gone on mute")
    term.press(b"q")
    assert term.wait_exit() == 0
    assert not any(line.startswith(("you:", "omni:", "omni talk: 1 turn")) for line in term.lines())


def test_speaking_over_the_answer_marks_it_at_the_cut(talk):
    term = talk("ptt", "story", str(speech_file()))
    term.wait_for(lambda t: status(t) == "press Space to talk", "the idle state")
    term.press(b" ")
    term.wait_for(lambda t: recorded(t) >= 1.5, "the recording timer")
    term.press(b" ")
    panels: list[str] = []  # the answer's line on the panel, each screen until the story is heard out

    def answer_on_panel(t) -> bool:
        panels.append(t.line_with(r"^│ omni: ") or "")
        return status(t) == "waiting for audio"

    term.wait_for(answer_on_panel, "the speaker run dry: the story's next sentence never comes")
    assert any("Once upon" in line for line in panels) and not any("He never" in line for line in panels)
    term.press(b" ")  # talk over it
    term.wait_for(lambda t: status(t) == "hearing you · interrupted", "the interruption")
    term.wait_for(lambda t: t.line_with(r"^omni: .*—\[interrupted\]"), "the cut answer")
    cut = term.line_with(r"^omni: ")
    heard = re.fullmatch(r"omni: (.*?) ?—\[interrupted\]( +\d+\.\d\d s)?", cut or "")
    assert heard is not None, cut
    assert "Once upon a time, a knight rode out.".startswith(heard[1])  # what was heard of it, never what came after
    term.wait_for(lambda t: recorded(t) >= 1.5, "the new turn's timer")
    term.press(b" ")
    term.wait_for(lambda t: t.line_with(r"^omni: It is noon\."), "the next answer")
    term.press(b"\x03")  # Ctrl-C
    assert term.wait_exit() == 130
    said = [line for line in term.lines() if line.startswith(("you:", "omni:"))]
    assert said == ["you:  what I said", cut, "you:  what I said", term.line_with(r"^omni: It is noon\.")], term.text()
    assert "^C" not in term.text()
    assert term.modes() == (True, True)


def test_voice_activity_from_a_file_with_the_real_cli(talk, tmp_path):
    """Two questions in a file, the second spoken while the first (endless) answer is still being
    made: `omni talk --input-file` on a terminal shows the same view, and what was said stays."""
    dialog = tmp_path / "dialog.wav"
    sf.write(str(dialog), np.concatenate([silence(0.3), speech(), silence(2.0), speech()]), 24000)
    term = talk("cli", "story-file", "talk", "--input-file", str(dialog), "--output-file", str(tmp_path / "said.wav"))
    term.wait_for(lambda t: status(t) == "listening" and "Esc interrupt · m mute · q quit" in t.text(), "listening")
    term.wait_for(lambda t: status(t) == "hearing you", "hearing you")
    frames: list[tuple[str | None, int]] = []  # each screen: the state, and how many of the user's lines are up

    def seen(t) -> bool:
        frames.append((status(t), sum(line.startswith("you:") for line in t.lines())))
        return t.line_with(r"^omni: .*—\[interrupted\]") is not None

    term.wait_for(seen, "the interrupted answer")
    assert term.wait_exit() == 0
    said = [line for line in term.lines() if line.startswith(("you:", "omni:"))]
    assert said[0] == "you:  tell me a story"
    assert re.fullmatch(r"omni: Once upon a time, a knight rode out\. —\[interrupted\] +\d+\.\d\d s", said[1])
    assert said[2] == "you:  what time is it" and said[3].startswith("omni: It is noon.")
    assert re.fullmatch(r"omni talk: 1 turn answered, 1 interrupted, median \d+ ms from end of speech to first audio", term.lines()[-1])
    assert borders(term) == 0 and term.modes() == (True, True)
    new_line = [state for (state, count), (_, before) in zip(frames[1:], frames[:-1], strict=True) if count > before]
    assert new_line and states.HEARING not in new_line  # the user's line comes with the panel that left "hearing you"


def test_esc_stops_the_answer_and_opens_no_turn(talk):
    term = talk("ptt", "story", str(speech_file()))
    term.wait_for(lambda t: status(t) == "press Space to talk", "the idle state")
    term.wait_for("Space talk · Esc interrupt · m mute · q quit", "Esc in the keys under the panel")
    term.press(b" ")
    term.wait_for(lambda t: recorded(t) >= 1.5, "the recording timer")
    term.press(b" ")
    term.wait_for(lambda t: status(t) == "speaking", "the story")
    term.press(b"\x1b")
    term.wait_for(lambda t: status(t) == "interrupted" and t.line_with(r"^omni: .*—\[interrupted\]"), "the answer stopped")
    cut = term.line_with(r"^omni: .*—\[interrupted\]")
    assert "He never came back" not in cut
    time.sleep(1.0)  # nothing else happens: no turn begins
    assert status(term) in ("interrupted", "press Space to talk") and recorded(term) == 0.0
    term.press(b"q")
    assert term.wait_exit() == 0
    assert not any("didn't catch that" in line for line in term.lines())
    assert re.fullmatch(r"omni talk: 0 turns answered, 1 interrupted, median \d+ ms from key press to first audio", term.lines()[-1])


def test_with_stderr_redirected_the_panel_is_on_the_terminal_and_the_file_gets_plain_lines(talk, tmp_path):
    log = tmp_path / "talk.log"
    term = talk("cli", "noon", "talk", "--input-file", str(speech_file()), "--output-file", str(tmp_path / "said.wav"),
                stderr=log)
    term.wait_for(lambda t: status(t) == "listening", "the panel on the terminal")
    term.wait_for(lambda t: t.line_with(r"^omni: It is noon\."), "the answer on the terminal")
    assert term.wait_exit() == 0
    assert borders(term) == 0 and term.modes() == (True, True)
    assert [line for line in term.lines() if line.startswith(("you:", "omni:"))][0] == "you:  what I said"
    lines = log.read_text().splitlines()
    assert lines[0] == "omni talk: listening"
    assert lines[1:3] == ["you:  what I said", lines[2]] and re.fullmatch(r"omni: +It is noon\. \(\d+\.\d\d s\)", lines[2])
    assert re.fullmatch(r"omni talk: 1 turn answered, median \d+ ms from end of speech to first audio", lines[-1])
    assert not any("╭" in line or "\x1b" in line for line in lines)  # no panel in the file


def test_an_error_while_loading_restores_the_terminal(talk, tmp_path):
    term = talk("cli", "broken", "talk", "--input-file", str(speech_file()), "--output-file", str(tmp_path / "said.wav"))
    assert term.wait_exit() == 1
    assert term.lines()[-1] == "omni: error: the thinker's model file is missing"
    assert borders(term) == 0 and term.modes() == (True, True)
