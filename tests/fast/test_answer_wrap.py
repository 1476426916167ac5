"""The REPL's word wrapping, written into a terminal emulator (pyte, in newline mode as a tty
with onlcr is) piece by piece as tokens stream: what the screen shows for any way of cutting the
text into tokens."""

import random

import pyte
import pytest

from omnicli.cli.wrap import Plain, WordWrap, answer_writer

TEXT = ("Hummingbirds are the smallest of birds; their hearts beat over twelve hundred times a minute and "
        "their wings eighty times a second, which is why they hum, and why a listener leans in to hear them.")
LONG = "Pneumonoultramicroscopicsilicovolcanoconiosis"


class Screen:
    def __init__(self, columns: int) -> None:
        self.screen = pyte.Screen(columns, 40)
        self.screen.set_mode(pyte.modes.LNM)
        self._stream = pyte.Stream(self.screen)

    def write(self, text: str) -> int:
        self._stream.feed(text)
        return len(text)

    def flush(self) -> None:
        pass

    def rows(self) -> list[str]:
        rows = [row.rstrip() for row in self.screen.display]
        while rows and not rows[-1]:
            rows.pop()
        return rows


def shown(tokens: list[str], columns: int) -> list[str]:
    screen = Screen(columns)
    wrap = WordWrap(screen, columns)
    for token in tokens:
        wrap.write(token)
    wrap.end()
    return screen.rows()


def cut(text: str, seed: int) -> list[str]:
    """`text` in random pieces of 1 to 8 characters, as a model's tokens might come."""
    rng, tokens, at = random.Random(seed), [], 0
    while at < len(text):
        step = rng.randint(1, 8)
        tokens.append(text[at : at + step])
        at += step
    return tokens


@pytest.mark.parametrize("columns", [20, 33, 80])
@pytest.mark.parametrize("seed", range(5))
def test_words_are_never_split_and_lines_are_filled(columns, seed):
    rows = shown(cut(TEXT, seed), columns)
    assert all(len(row) <= columns for row in rows)
    assert [word for row in rows for word in row.split()] == TEXT.split()
    for row, following in zip(rows, rows[1:], strict=False):  # each break: the next word did not fit
        assert len(row) + 1 + len(following.split()[0]) > columns, (row, following)


def test_a_word_longer_than_a_line_moves_to_its_own_line_and_is_cut_at_the_edge():
    rows = shown(["Look: ", *cut(LONG, 1), " ok"], 20)
    assert rows == ["Look:", LONG[:20], LONG[20:40], LONG[40:] + " ok"]


def test_newlines_and_indents_in_the_answer_are_kept():
    rows = shown(["Steps:\n", "  1. Boil", " the", " water\n  2.", " Pour"], 40)
    assert rows == ["Steps:", "  1. Boil the water", "  2. Pour"]


def test_a_word_that_exactly_fills_the_line_leaves_no_blank_row():
    assert shown(["abcde", " fghij", " k"], 11) == ["abcde fghij", "k"]
    assert shown(["abcdefghij", "k", " lm"], 11) == ["abcdefghijk", "lm"]


def test_wide_characters_count_two_cells():
    assert shown(["日本語", " の", " テキ", "スト"], 10) == ["日本語 の", "テキスト"]


def test_text_that_is_not_for_a_terminal_is_left_as_it_came(tmp_path):
    with open(tmp_path / "answer.txt", "w") as file:
        writer = answer_writer(file)
        assert isinstance(writer, Plain)
        writer.write("x" * 300)
        writer.end()
    assert (tmp_path / "answer.txt").read_text() == "x" * 300 + "\n"
