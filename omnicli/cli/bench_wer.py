"""`omni bench-wer`: Seed-TTS-eval style intelligibility and latency benchmark.

Exit codes: 0 done, 1 errors (bad run, every utterance failed), 2 usage, 3 mean WER over --max-wer.
"""

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from omnicli.cli.console import note
from omnicli.cli.options import (
    ApiKeyOption,
    AsrModelOption,
    AsrServerOption,
    ModelOption,
    ServerOption,
    TimeoutOption,
    VoiceOption,
)
from omnicli.errors import OmniError, UsageError

WER_GATE_EXIT = 3


def bench_wer(
    ctx: typer.Context,
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="A Seed-TTS-eval meta.lst, or a text file with one sentence a line.")],
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Use the first N utterances.", show_default=False)] = None,
    shuffle: Annotated[bool, typer.Option("--shuffle", help="Shuffle before --limit.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Shuffle seed.")] = 0,
    clone: Annotated[
        bool | None, typer.Option("--clone/--no-clone", help="Send prompt wavs as reference voices (default: when the list has them and the target can).", show_default=False)
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, max=64, help="Synthesis requests in flight.")] = 1,
    audio_dir: Annotated[str | None, typer.Option("--audio-dir", help="Score existing <utt>.wav files instead of synthesizing.", show_default=False)] = None,
    asr_model: AsrModelOption = None,
    asr_server: AsrServerOption = None,
    asr_device: Annotated[str, typer.Option("--asr-device", help="cpu or cuda.")] = "cpu",
    language: Annotated[str | None, typer.Option("--language", help="en or zh; default: per utterance from its text.", show_default=False)] = None,
    normalizer: Annotated[str, typer.Option("--normalizer", help="seed-tts (the protocol) or whisper (Whisper's English normaliser).")] = "seed-tts",
    out: Annotated[str | None, typer.Option("--out", "-o", help="Directory for items.jsonl and summary.json.", show_default=False)] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Skip utterances already in --out's items.jsonl.")] = False,
    keep_audio: Annotated[bool, typer.Option("--keep-audio", help="Keep the synthesized audio in --out.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")] = False,
    report: Annotated[str | None, typer.Option("--report", help="Write a self-contained HTML report here.", show_default=False)] = None,
    max_wer: Annotated[float | None, typer.Option("--max-wer", min=0.0, help="Exit 3 when the mean WER (a fraction, 0.05 = 5 %) is above this.", show_default=False)] = None,
    voice: VoiceOption = None,
    model: ModelOption = None,
    server: ServerOption = None,
    api_key: ApiKeyOption = None,
    timeout: TimeoutOption = None,
) -> None:
    """Synthesize a dataset, transcribe it, score WER as Seed-TTS-eval does, report latency."""
    import asyncio

    from omnicli.bench.dataset import load_dataset
    from omnicli.bench.journal import Journal
    from omnicli.bench.runner import BenchOptions
    from omnicli.bench.scoring import summarize
    from omnicli.cli.engines import engines
    from omnicli.cli.files import check_writable, make_folder
    from omnicli.config import resolve_connection

    if normalizer not in ("seed-tts", "whisper"):
        raise UsageError(f"--normalizer must be 'seed-tts' or 'whisper', got {normalizer!r}")
    if language not in (None, "en", "zh"):
        raise UsageError(f"--language must be 'en' or 'zh', got {language!r}")
    if (resume or keep_audio) and not out:
        raise UsageError("--resume and --keep-audio need --out DIR")
    if audio_dir and not Path(audio_dir).is_dir():
        raise UsageError(f"--audio-dir {audio_dir} is not a directory")
    if report:
        check_writable(report, "--report")
    data = load_dataset(dataset, limit=limit, shuffle=shuffle, seed=seed)
    for problem in data.malformed:
        note(f"omni: warning: {dataset}: {problem} (skipped)")
    connection = resolve_connection(server, api_key, timeout)
    factory = engines(ctx)

    wants_clone = data.has_prompts if clone is None else clone
    if wants_clone and not connection.server and not audio_dir:
        note("omni: the embedded engine cannot clone voices; using its own voice for every utterance")
        wants_clone = False
    if wants_clone:
        for item in data.items:
            if item.prompt_wav is not None and not item.prompt_wav.is_file():
                note(f"omni: warning: {dataset}: line {item.line}: prompt wav {item.prompt_wav} is missing")

    out_dir = make_folder(out, "--out") if out else None
    journal = Journal(out_dir, resume=resume)
    done = journal.done
    todo = [item for item in data.items if item.utt not in done]
    if resume and done:
        note(f"omni: resuming: {len(done)} utterances already scored, {len(todo)} to go")
    keep_dir = None
    if keep_audio and out_dir is not None:
        keep_dir = make_folder(str(out_dir / "audio"), "--keep-audio")
    options = BenchOptions(
        concurrency=concurrency, clone=wants_clone, voice=voice, model=model, language=language,
        normalizer=normalizer, audio_dir=Path(audio_dir) if audio_dir else None, keep_audio_dir=keep_dir,
    )
    judge = factory.judge(asr_model, asr_device, _judge_connection(asr_server, connection))
    try:
        asyncio.run(_run(todo, factory, connection, judge, options, journal, audio_dir is not None))
    finally:
        journal.close()

    records = [r for r in journal.records if r["utt"] in {i.utt for i in data.items}]
    summary = summarize(records)
    summary["malformed_lines"] = len(data.malformed)
    summary["dataset"] = str(dataset)
    summary["target"] = "audio-dir" if audio_dir else (connection.server or "embedded")
    if out_dir is not None:
        from omnicli.audio.atomic import atomic_write

        atomic_write(out_dir / "summary.json", (json.dumps(summary, indent=2) + "\n").encode())
    if report:
        from omnicli.audio.atomic import atomic_write
        from omnicli.bench.report import render

        atomic_write(report, render(summary, records, title=f"omni bench-wer: {Path(dataset).name}").encode())
    if json_output:
        print(json.dumps(summary))
    else:
        _print_table(summary)
    if summary["scored"] == 0:
        raise OmniError("no utterance could be scored (see the failures above)")
    if max_wer is not None and summary["wer_mean"] is not None and summary["wer_mean"] > max_wer:
        note(f"omni: mean WER {summary['wer_mean']:.4f} is above --max-wer {max_wer}")
        raise typer.Exit(WER_GATE_EXIT)


def _judge_connection(asr_server: str | None, connection):
    """The Whisper server that judges (--asr-server), reached with the run's key and timeout."""
    if not asr_server:
        return None
    from omnicli.config import Connection, server_url

    return Connection(server_url(asr_server, "--asr-server"), connection.api_key, connection.timeout)


async def _run(todo, factory, connection, judge, options, journal, scoring_only: bool) -> None:
    from omnicli.bench.progress import BenchProgress
    from omnicli.bench.runner import run_bench
    from omnicli.cli.engines import EngineChoice

    engine = None
    try:
        await judge.preload()
        if not scoring_only:
            engine = factory.engine(EngineChoice(connection, speech_stream="audio"))
            await engine.check()
        with BenchProgress(len(todo)) as progress:
            def record(entry: dict) -> None:
                journal.append(entry)
                progress.update(entry)
                if entry["status"] != "ok":
                    note(f"omni: {entry['utt']} (line {entry['line']}): {entry['status']}: {entry.get('error', '')}")

            await run_bench(todo, engine, judge, options, record)
    finally:
        if engine is not None:
            await engine.aclose()
        await factory.release(judge)


def _print_table(summary: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    pct = lambda v: "–" if v is None else f"{v * 100:.2f} %"  # noqa: E731
    sec = lambda v: "–" if v is None else f"{v:.3f}"  # noqa: E731
    table = Table(title="bench-wer", show_header=False)
    failures = summary["failures"]
    for name, value in [
        ("utterances scored", f"{summary['scored']} of {summary['utterances']}"),
        ("WER (mean of utterances)", pct(summary["wer_mean"])),
        ("WER (corpus)", pct(summary["wer_corpus"])),
        ("WER median / p90", f"{pct(summary['wer_median'])} / {pct(summary['wer_p90'])}"),
        ("failed: request / no audio / ASR", f"{failures['request_failed']} / {failures['no_audio']} / {failures['asr_failed']}"),
        ("malformed lines skipped", str(summary["malformed_lines"])),
        ("first audio p50 / p90 (s)", f"{sec(summary['ttfa_p50'])} / {sec(summary['ttfa_p90'])}"),
        ("RTF (mean)", sec(summary["rtf_mean"])),
        ("audio (s)", f"{summary['audio_seconds']:.1f}"),
    ]:
        table.add_row(name, value)
    Console(file=sys.stdout).print(table)
