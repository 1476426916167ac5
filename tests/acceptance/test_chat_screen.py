"""`omni chat` on a real pseudo-terminal, the screen rendered by a terminal emulator: answers
wrap between words, "thinking…" shows until the first token and leaves nothing behind, and
Ctrl-D typed while an answer streams ends the session once the answer is complete."""

import pytest

from tests.helpers.scripted_tty import scripted_omni

ANSWER = ("The extraordinary thing about hummingbirds is that their hearts beat over twelve hundred "
          "times a minute, supercalifragilistically fast.")
TOKENS = ["The", " extra", "ord", "inary", " thing about", " humming", "birds is", " that their", " hearts",
          " beat over", " twelve", " hundred times", " a minute,", " super", "cali", "fragil", "istically",
          " fast."]


@pytest.fixture
def terminals():
    started = []

    def start(*args, **kwargs):
        started.append(scripted_omni(*args, **kwargs))
        return started[-1]

    yield start
    for terminal in started:
        terminal.close()


def answered(prompt: str):
    """The screen shows `prompt`'s answer and the next prompt."""
    return lambda term: f">>> {prompt}" in term.lines() and term.lines()[-1] == ">>>"


def shows(text: str):
    return lambda term: text in term.text()


def answer_rows(rows: list[str], prompt: str) -> list[str]:
    """The rows between the prompt line and the next prompt (or the end)."""
    start = rows.index(f">>> {prompt}") + 1
    end = next((i for i in range(start, len(rows)) if rows[i].startswith(">>>")), len(rows))
    return rows[start:end]


def test_answers_wrap_between_words_never_inside_one(terminals):
    assert "".join(TOKENS) == ANSWER
    term = terminals("chat", "-i", engine=f"ScriptedEngine(chat=answer(*{TOKENS!r}))", cols=32)
    term.wait_for(shows(">>>"), "the prompt")
    term.press(b"Tell me\r")
    term.wait_for(answered("Tell me"), "the answer")
    rows = answer_rows(term.lines(), "Tell me")
    assert len(rows) >= 4 and all(len(row) <= 32 for row in rows)
    assert [word for row in rows for word in row.split()] == ANSWER.split()
    # Lines are filled: each break comes only where the next word would not have fitted.
    words = ANSWER.split()
    for row, following in zip(rows, rows[1:], strict=False):
        assert len(row) + 1 + len(following.split()[0]) > 32, (row, following)
    assert words  # the check above saw real rows


def test_thinking_shows_until_the_first_token_and_leaves_nothing(terminals, tmp_path):
    go = tmp_path / "go"
    term = terminals("chat", "-i", engine=f"ScriptedEngine(chat=[gate({str(go)!r}), *answer('Hello', ' there.')])")
    term.wait_for(shows(">>>"), "the prompt")
    term.press(b"Hi\r")
    term.wait_for(shows("thinking…"), "thinking…")
    rows = term.lines()
    assert rows[-2] == ">>> Hi" and rows[-1].endswith("thinking…")
    go.touch()
    term.wait_for(answered("Hi"), "the answer")
    rows = term.lines()
    assert rows[-3:] == [">>> Hi", "Hello there.", ">>>"]
    assert "thinking" not in term.text()
    term.press(b"\x04")
    assert term.wait_exit() == 0


def test_thinking_shows_for_a_one_shot_question_too(terminals, tmp_path):
    go = tmp_path / "go"
    term = terminals("chat", "Hi", engine=f"ScriptedEngine(chat=[gate({str(go)!r}), *answer('Hello', ' there.')])")
    term.wait_for(shows("thinking…"), "thinking…")
    assert term.lines()[-1].endswith("thinking…")
    go.touch()
    assert term.wait_exit() == 0
    assert term.lines() == ["Hello there."]


def test_ctrl_d_while_an_answer_streams_ends_the_session_after_it(terminals):
    script = "[TextDelta('Once upon'), until_typed, *answer(' a time.')]"
    term = terminals("chat", "-i", engine=f"ScriptedEngine(chat=lambda req: {script})")
    term.wait_for(shows(">>>"), "the prompt")
    term.press(b"Tell a story\r")
    term.wait_for(shows("Once upon"), "the answer's start")
    term.press(b"\x04")
    assert term.wait_exit() == 0
    rows = term.lines()
    assert rows[-2:] == [">>> Tell a story", "Once upon a time."]  # the whole answer, and no new prompt


def test_a_line_typed_while_an_answer_streams_is_the_next_question(terminals):
    script = ("lambda req: [TextDelta('One'), until_typed, *answer(' two.')] if len(req.messages) == 2 "
              "else answer('You said ' + req.messages[-1].text + '.')")
    term = terminals("chat", "-i", engine=f"ScriptedEngine(chat={script})")
    term.wait_for(shows(">>>"), "the prompt")
    term.press(b"Count\r")
    term.wait_for(shows("One"), "the answer's start")
    term.press(b"again\r")
    term.wait_for(shows("You said again."), "the second answer")
    term.press(b"\x04")
    assert term.wait_exit() == 0
