"""Streamed text on a terminal, wrapped between words as it arrives.

A terminal wraps wherever the line is full, in the middle of a word. Here each piece is written
at once (the answer still streams token by token), and when a word grows past the right edge it
is erased from the line it started on and written again at the start of the next one. A word
longer than a whole line is cut at the edge. Only for terminals: piped text is left as it came.
"""

from typing import TextIO

from rich.cells import cell_len

_TAB = 4


class WordWrap:
    """Streamed text on a terminal `width` cells wide, moving a word that overflows to the next line."""

    def __init__(self, out: TextIO, width: int) -> None:
        self._out = out
        self._width = max(width, 2)
        self._column = 0
        """Cells used on the current line, including the word being written."""
        self._word = ""
        """The word being written (on screen), and the spaces written just before it."""
        self._lead = ""
        self._spaces = ""
        """Spaces after the last word, not written yet: they go before the next word if it fits."""

    def write(self, text: str) -> None:
        """Write the next piece of the answer, wrapping between words."""
        for char in text:
            if char == "\n":
                self._newline()
            elif char.isspace():
                self._word, self._lead = "", ""
                self._spaces += " " * _TAB if char == "\t" else " "
            else:
                self._letter(char)
        self._out.flush()

    def end(self) -> None:
        """Finish the answer's last line."""
        self._newline()
        self._out.flush()

    def _letter(self, char: str) -> None:
        cells = cell_len(char)
        if not self._word:  # a new word: after the pending spaces if it fits, else on a new line
            if self._column and self._column + len(self._spaces) + cells > self._width:
                self._newline()
            self._lead, self._spaces = self._spaces[: self._width - cells], ""
            self._put(self._lead)
        elif self._column + cells > self._width:
            start = self._column - cell_len(self._word) - len(self._lead)
            if start == 0:  # the word fills a whole line: cut it here
                self._newline()
                self._word = ""
            else:  # erase it (and its leading spaces) and write it again on a new line
                self._out.write("\r" + (f"\x1b[{start}C" if start else "") + "\x1b[K")
                word = self._word
                self._newline()
                self._word = word
                self._put(word)
        self._put(char)
        self._word += char

    def _put(self, text: str) -> None:
        self._out.write(text)
        self._column += cell_len(text)

    def _newline(self) -> None:
        self._out.write("\n")
        self._column = 0
        self._word, self._lead, self._spaces = "", "", ""


class Plain:
    """Text as it came (not a terminal: a pipe or a file)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def write(self, text: str) -> None:
        """Write the next piece of the answer unchanged."""
        self._out.write(text)
        self._out.flush()

    def end(self) -> None:
        """Finish the answer's last line."""
        self.write("\n")


def answer_writer(out: TextIO) -> "WordWrap | Plain":
    """Wrapped between words on a terminal, as it came anywhere else."""
    import os

    try:
        if out.isatty():
            return WordWrap(out, os.get_terminal_size(out.fileno()).columns)
    except (OSError, ValueError):  # no real file behind `out`
        pass
    return Plain(out)
