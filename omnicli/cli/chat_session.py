"""A chat conversation on any engine: one turn at a time, history kept for the session.

Text streams to stdout as it arrives (on a terminal wrapped between words, after a "thinking…"
spinner that the first token replaces); speech goes to a file (written whole) and/or the speaker.
In the REPL, Ctrl-C cancels the answer being made, not the session; Ctrl-D typed while an answer
streams ends the session once the answer is complete, as it would at the prompt. A turn that
fails says so and the session goes on, but the session then ends with exit code 1 (a script
feeding it turns learns that not every turn was answered).
"""

import asyncio
import json
import logging
import sys
import time
from dataclasses import dataclass

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.formats import AudioFormat
from omnicli.cli.console import Thinking
from omnicli.cli.wrap import answer_writer
from omnicli.engine.base import (
    AudioDelta,
    AudioPart,
    ChatDone,
    ChatRequest,
    Engine,
    Message,
    TextDelta,
    TextPart,
    TranscriptDelta,
)
from omnicli.errors import OmniError

log = logging.getLogger("omni")
PROMPT = ">>> "
REPL_COMMANDS = {
    "/help": "this list",
    "/reset": "forget the conversation so far",
    "/save [PATH]": "write the conversation as JSON (default: omni-chat-DATE-TIME.json here)",
    "/exit": "leave (so do exit, quit and Ctrl-D; Ctrl-D during an answer leaves after it)",
    "//text": "send a message that starts with /",
}


@dataclass(frozen=True)
class TurnOutput:
    """Where each answer goes: the audio file and its format, the speaker, JSON instead of text."""

    path: str | None
    fmt: AudioFormat
    play: bool
    json: bool


class ChatSession:
    """One `omni chat` conversation: its settings, its history and the turns that failed."""

    def __init__(
        self,
        engine: Engine,
        *,
        system: str | None,
        modalities: tuple[str, ...],
        voice: str | None,
        model: str | None,
        max_tokens: int,
        temperature: float,
        output: TurnOutput,
    ) -> None:
        self.engine = engine
        self.system = system
        self.modalities = modalities
        self.voice = voice
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.output = output
        self.history: list[Message] = []
        self.turns = 0
        self.failed = 0
        """Turns that failed, or whose audio file could not be written (no audio came back)."""
        self._end_typed = False
        """Ctrl-D was typed while an answer streamed: the REPL ends after it."""
        self.reset()

    def reset(self) -> None:
        """Forget the conversation, keeping only the system prompt."""
        self.history = [Message("system", [TextPart(self.system)])] if self.system else []

    def one_shot(self, message: Message) -> dict:
        """Answer one message and close the engine: `omni chat` without the REPL."""
        with asyncio.Runner() as runner:
            try:
                return runner.run(self.turn(message))
            finally:
                runner.run(self.engine.aclose())

    def repl(self, first: list | None = None) -> None:
        """Read prompts until `exit` or end of input; a line starting with '/' is a command
        (REPL_COMMANDS), never a message to the model."""
        tty = sys.stdin.isatty()
        if tty:
            import readline  # noqa: F401 - line editing and history for input()
            import shutil
            import textwrap

            banner = "omni chat: type a message; /help lists the commands; Ctrl-D or /exit leaves"
            print(textwrap.fill(banner, shutil.get_terminal_size().columns - 1), file=sys.stderr)
        with asyncio.Runner() as runner:
            try:
                if first:
                    self._run_turn(runner, Message("user", first), tty)
                while not self._end_typed:
                    try:
                        line = input(PROMPT) if tty else sys.stdin.readline()
                    except KeyboardInterrupt:
                        print(file=sys.stderr)
                        continue
                    except EOFError:
                        print(file=sys.stderr)  # Ctrl-D leaves the prompt's line unfinished
                        break
                    if not tty and not line:
                        break
                    line = line.strip()
                    if line in ("exit", "quit"):
                        break
                    if line.startswith("/") and not line.startswith("//"):
                        if not self.command(line):
                            break
                    elif line:
                        self._run_turn(runner, Message("user", [TextPart(line.removeprefix("/"))]), tty)
            finally:
                runner.run(self.engine.aclose())
        if self.failed:
            raise OmniError(f"{self.failed} of {self.turns} turns failed")

    def _run_turn(self, runner: asyncio.Runner, message: Message, tty: bool) -> None:
        try:
            runner.run(self._watched_turn(message) if tty else self.turn(message))
        except KeyboardInterrupt:
            print("\n(cancelled)", file=sys.stderr)
        except OmniError as exc:
            self.failed += 1
            print(f"omni: error: {exc}" + (f" ({exc.hint})" if exc.hint else ""), file=sys.stderr)

    async def _watched_turn(self, message: Message) -> None:
        """A turn that also notices Ctrl-D typed on the terminal meanwhile (which input() would
        never see: readline reads the tty's end-of-file mark as a NUL and drops it)."""
        loop = asyncio.get_running_loop()
        fd = sys.stdin.fileno()
        loop.add_reader(fd, self._typed_ahead, loop, fd)
        try:
            await self.turn(message)
        finally:
            loop.remove_reader(fd)

    def _typed_ahead(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        """Input came while the answer streams. The terminal is in line mode, so this is a whole
        line (left for the next prompt) or Ctrl-D on an empty one (readable with nothing to read),
        which ends the session after this answer."""
        import fcntl
        import os
        import struct
        import termios

        loop.remove_reader(fd)
        pending = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        if pending == 0:
            os.read(fd, 1)  # takes the end-of-file mark (returns b"")
            self._end_typed = True

    def command(self, line: str) -> bool:
        """Carry out a REPL command; False when it ends the session."""
        name, _, argument = line.partition(" ")
        match name:
            case "/exit" | "/quit":
                return False
            case "/help":
                width = max(len(usage) for usage in REPL_COMMANDS)
                for usage, meaning in REPL_COMMANDS.items():
                    print(f"  {usage:<{width}}  {meaning}", file=sys.stderr)
            case "/reset":
                self.reset()
                print("(history cleared)", file=sys.stderr)
            case "/save":
                self.save(argument.strip() or time.strftime("omni-chat-%Y%m%d-%H%M%S.json"))
            case _:
                print(f"omni: error: unknown command {name} (/help lists them; start a message with // "
                      "to send one that begins with /)", file=sys.stderr)
        return True

    def save(self, path: str) -> None:
        """Write the conversation's text to `path` as JSON (the REPL's /save); a failure is only reported."""
        from omnicli.audio.atomic import atomic_write

        messages = [{"role": m.role, "content": m.text} for m in self.history]
        try:
            atomic_write(path, json.dumps({"messages": messages}, indent=2).encode() + b"\n")
        except OmniError as exc:
            print(f"omni: error: {exc}", file=sys.stderr)
            return
        print(f"(saved {len(messages)} messages to {path})", file=sys.stderr)

    async def turn(self, message: Message) -> dict:
        """Send `message` with the history; stream the answer; keep both if it completes."""
        req = ChatRequest(
            messages=[*self.history, message],
            modalities=self.modalities,
            voice=self.voice,
            model=self.model,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
        )
        self.turns += 1
        sink = self._speech_sink()
        transcripts: list[str] = []
        done: ChatDone | None = None
        clock = _Clock()
        text_out = answer_writer(sys.stdout)
        thinking = Thinking()
        try:
            if sink is not None:
                await sink.open()
            thinking.start()
            async for delta in self.engine.chat(req):
                match delta:
                    case TextDelta(text=text):
                        clock.first("text")
                        thinking.stop()
                        if not self.output.json:
                            text_out.write(text)
                    case AudioDelta(chunk=chunk) if sink is not None:
                        clock.first("audio")
                        thinking.stop()
                        await sink.write(chunk)
                    case TranscriptDelta(text=text):
                        transcripts.append(text)
                        log.info("heard: %s", text)
                    case ChatDone():
                        done = delta
            thinking.stop()
            if not self.output.json:
                text_out.end()
            if sink is not None and done is not None and sink.empty:
                self._no_audio()
                sink.abort()
                sink = None
            if sink is not None:
                await sink.finish()
        finally:
            thinking.stop()
            if sink is not None:
                sink.abort()
        if done is None:
            raise OmniError("the answer ended without completing")
        self._remember(message, transcripts, done.text)
        if sink is not None and self.output.path not in (None, "-"):
            print(f"(wrote {self.output.path})", file=sys.stderr)
        log.debug("loaded: %s", self.engine.loaded())
        for stage, figures in done.metrics.items():
            log.debug("%s: %s", stage, ", ".join(f"{k}={v:.3f}" for k, v in figures.items() if k not in ("started", "first_output", "finished")))
        return {
            "text": done.text,
            "transcripts": transcripts,
            "audio": self.output.path if sink is not None and self.output.path else None,
            "finish_reason": done.finish_reason,
            "usage": done.usage,
            "timings": {**clock.seconds(), **done.metrics},
        }

    def _no_audio(self) -> None:
        """Audio was asked for and none came (a text-only server): the text stands; a file the
        user named is not written, and that is an error; speech only to play is a warning."""
        what = "no audio came back (the answer is text only)"
        if self.output.path:
            self.failed += 1
            print(f"omni: error: {what}; nothing written to {self.output.path}", file=sys.stderr)
        else:
            print(f"omni: warning: {what}", file=sys.stderr)

    def _speech_sink(self):
        if "audio" not in self.modalities:
            return None
        from omnicli.audio.sink import SpeechOutput

        play = self.output.play or self.output.path is None
        return SpeechOutput(output=self.output.path, fmt=self.output.fmt, rate=SPEECH_RATE, play=play)

    def _remember(self, message: Message, transcripts: list[str], answer: str) -> None:
        """Keep the turn; audio the engine already heard is kept as its transcript."""
        if transcripts and len(transcripts) == sum(isinstance(p, AudioPart) for p in message.parts):
            heard = iter(transcripts)
            message = Message(
                message.role,
                [TextPart(next(heard)) if isinstance(p, AudioPart) else p for p in message.parts],
            )
        self.history += [message, Message("assistant", [TextPart(answer)])]


class _Clock:
    """What the user waited for, measured here whatever the engine: the first text, the first
    audio, the whole answer (seconds from sending the request)."""

    def __init__(self) -> None:
        self._start = time.perf_counter()
        self._firsts: dict[str, float] = {}

    def first(self, what: str) -> None:
        """`what` ("text" or "audio") came now, if it had not come before."""
        self._firsts.setdefault(what, time.perf_counter() - self._start)

    def seconds(self) -> dict[str, float | None]:
        """The first text, the first audio and the whole answer, in seconds (None: never came)."""
        return {
            "first_text_seconds": _rounded(self._firsts.get("text")),
            "first_audio_seconds": _rounded(self._firsts.get("audio")),
            "total_seconds": _rounded(time.perf_counter() - self._start),
        }


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 4)
