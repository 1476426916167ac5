"""`omni bench-wer`: Seed-TTS-eval style intelligibility and latency benchmark.

One run per load level: `--concurrency 1,4,8` sweeps (each level in its own folder of --out,
the figures side by side), `--rate R` starts requests at Poisson arrivals. Against several
servers, requests spread over them and the summary has each server's figures.

`--baseline RUN` sets each level beside an earlier run, item by item (`bench/compare.py`).

Exit codes: 0 done, 1 errors (bad run, every utterance failed), 2 usage, 3 mean WER over --max-wer,
4 a figure significantly worse than --baseline's (with --fail-if-worse).
"""

import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

import typer

from omnicli.cli.console import note
from omnicli.cli.options import (
    ApiKeyOption,
    AsrModelOption,
    AsrServerOption,
    EngineOption,
    ModelOption,
    ServerOption,
    StageParamOption,
    TimeoutOption,
    VoiceOption,
)
from omnicli.errors import OmniError, UsageError

WER_GATE_EXIT = 3
WORSE_THAN_BASELINE_EXIT = 4
MAX_CONCURRENCY = 256


@dataclass(frozen=True)
class Level:
    """The load of one run: requests in flight at most (None: no limit), arrivals a second."""

    concurrency: int | None
    rate: float | None

    @property
    def name(self) -> str:
        """How reports and tables name this load, e.g. `c=4, 2/s`."""
        from omnicli.bench.tables import level_name

        return level_name({"max_concurrency": self.concurrency, "request_rate": self.rate})

    @property
    def folder(self) -> str:
        """Its folder in --out when several levels run: c4, r2, c4-r2."""
        parts = ([f"c{self.concurrency}"] if self.concurrency else []) + ([f"r{self.rate:g}"] if self.rate else [])
        return "-".join(parts)


@dataclass
class Plan:
    """One level's run: its journal, what is left to do, and what it measured."""

    level: Level
    journal: Any
    todo: list
    keep_dir: Path | None
    duration: float | None = None
    servers: dict | None = None
    records: list[dict] = field(default_factory=list)


def bench_wer(
    ctx: typer.Context,
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="A Seed-TTS-eval meta.lst, or a text file with one sentence a line.")],
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Use the first N utterances.", show_default=False)] = None,
    shuffle: Annotated[bool, typer.Option("--shuffle", help="Shuffle before --limit.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of --shuffle and of --rate's arrival times.")] = 0,
    clone: Annotated[
        bool | None, typer.Option("--clone/--no-clone", help="Send prompt wavs as reference voices (default: when the list has them and the target can).", show_default=False)
    ] = None,
    concurrency: Annotated[
        str | None, typer.Option("--concurrency", "-c", help="Synthesis requests in flight (default 1; with --rate, no limit). A comma list (1,4,8,16) runs once per level, side by side.", show_default=False)
    ] = None,
    rate: Annotated[
        float | None, typer.Option("--rate", help="Open loop: start requests at Poisson arrivals, R a second on average (--seed fixes them); -c caps those in flight.", show_default=False)
    ] = None,
    audio_dir: Annotated[str | None, typer.Option("--audio-dir", help="Score existing <utt>.wav files instead of synthesizing.", show_default=False)] = None,
    asr_model: AsrModelOption = None,
    asr_server: AsrServerOption = None,
    asr_device: Annotated[str, typer.Option("--asr-device", help="cpu or cuda.")] = "cpu",
    language: Annotated[str | None, typer.Option("--language", help="en or zh; default: per utterance from its text.", show_default=False)] = None,
    normalizer: Annotated[str, typer.Option("--normalizer", help="seed-tts (the protocol) or whisper (Whisper's English normaliser).")] = "seed-tts",
    out: Annotated[str | None, typer.Option("--out", "-o", help="Directory for items.jsonl and summary.json (a folder per level of a sweep).", show_default=False)] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Skip utterances already in --out's items.jsonl.")] = False,
    keep_audio: Annotated[bool, typer.Option("--keep-audio", help="Keep the synthesized audio in --out.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")] = False,
    report: Annotated[str | None, typer.Option("--report", help="Write a self-contained HTML report here.", show_default=False)] = None,
    max_wer: Annotated[float | None, typer.Option("--max-wer", min=0.0, help="Exit 3 when the mean WER (a fraction, 0.05 = 5 %) is above this (in any level).", show_default=False)] = None,
    mos: Annotated[bool, typer.Option("--mos", help='Predict each clip\'s MOS with DNSMOS (pip install "omni[mos]").')] = False,
    sim: Annotated[bool, typer.Option("--sim", help='Speaker similarity of each clip to its prompt wav, as Seed-TTS-eval\'s SIM (pip install "omni[sim]").')] = False,
    published: Annotated[bool, typer.Option("--published", help="Show other systems' published Seed-TTS-eval figures beside the run (labelled as published).")] = False,
    baseline: Annotated[
        str | None, typer.Option("--baseline", help="An earlier run (its --out folder or items.jsonl): compare item by item, with a paired bootstrap.", show_default=False)
    ] = None,
    fail_if_worse: Annotated[bool, typer.Option("--fail-if-worse", help="Exit 4 when a figure is significantly worse than --baseline's.")] = False,
    voice: VoiceOption = None,
    model: ModelOption = None,
    engine: EngineOption = None,
    stage_param: StageParamOption = None,
    server: ServerOption = None,
    api_key: ApiKeyOption = None,
    timeout: TimeoutOption = None,
) -> None:
    """Synthesize a dataset, transcribe it, score WER as Seed-TTS-eval does, report latency."""
    import asyncio

    from omnicli.bench.dataset import load_dataset
    from omnicli.bench.journal import Journal
    from omnicli.bench.runner import BenchOptions
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
    levels = _levels(concurrency, rate)
    if audio_dir and (rate is not None or len(levels) > 1):
        raise UsageError("--rate and a --concurrency list measure synthesis; --audio-dir only scores existing files")
    if fail_if_worse and not baseline:
        raise UsageError("--fail-if-worse needs --baseline RUN")
    if report:
        check_writable(report, "--report")
    earlier = None
    if baseline:
        from omnicli.bench.compare import load_baseline

        earlier = load_baseline(baseline)
    data = load_dataset(dataset, limit=limit, shuffle=shuffle, seed=seed)
    for problem in data.malformed:
        note(f"omni: warning: {dataset}: {problem} (skipped)")
    connection = resolve_connection(server, api_key, timeout)
    factory = engines(ctx)
    from omnicli.bench.runner import ExtraJudges

    extra = ExtraJudges(factory.naturalness() if mos else None, factory.speaker_similarity() if sim else None)
    from omnicli.cli.engines import EngineChoice, check_runtime

    choice = EngineChoice(connection, speech_stream="audio", engine=engine, model=model if engine == "vllm-omni" else None,
                          stage_params=tuple(stage_param or ()))
    check_runtime(choice)

    if sim and not data.has_prompts:
        raise UsageError("--sim compares each clip with its prompt wav: give a meta.lst with prompt wavs")
    wants_clone = data.has_prompts if clone is None else clone
    if wants_clone and not connection.server and not audio_dir and engine != "vllm-omni":
        note("omni: the embedded engine cannot clone voices; using its own voice for every utterance")
        wants_clone = False
    if wants_clone:
        for item in data.items:
            if item.prompt_wav is not None and not item.prompt_wav.is_file():
                note(f"omni: warning: {dataset}: line {item.line}: prompt wav {item.prompt_wav} is missing")

    out_dir = make_folder(out, "--out") if out else None
    sweep = len(levels) > 1
    plans: list[Plan] = []
    try:
        for level in levels:
            folder = make_folder(str(out_dir / level.folder), "--out") if sweep and out_dir is not None else out_dir
            journal = Journal(folder, resume=resume)
            plans.append(Plan(level, journal, [i for i in data.items if i.utt not in journal.done],
                              make_folder(str(folder / "audio"), "--keep-audio") if keep_audio and folder else None))
            if resume and journal.done:
                where = f" at {level.name}" if sweep else ""
                note(f"omni: resuming{where}: {len(journal.done)} utterances already scored, {len(plans[-1].todo)} to go")
        options = BenchOptions(
            clone=wants_clone, voice=voice, model=model, language=language, normalizer=normalizer, seed=seed,
            audio_dir=Path(audio_dir) if audio_dir else None,
        )
        judge = factory.judge(asr_model, asr_device, _judge_connection(asr_server, connection))
        asyncio.run(_run(plans, factory, connection, judge, options, audio_dir is not None, choice, extra))
    finally:
        for plan in plans:
            plan.journal.close()

    target = "audio-dir" if audio_dir else (",".join(connection.servers) or engine or "embedded")
    runs = [(_summary(plan, data, dataset, target), _records(plan, data)) for plan in plans]
    summaries = [summary for summary, _ in runs]
    for summary in summaries:
        if extra.naturalness is not None and "mos_mean" in summary:
            summary["mos_model"] = extra.naturalness.name
        if extra.similarity is not None and "sim_mean" in summary:
            summary["sim_model"] = extra.similarity.name
    if earlier is not None:
        from omnicli.bench.compare import compare

        for summary, records in runs:
            summary["ab"] = compare(records, earlier[1], baseline_path=str(earlier[0]), seed=seed)
    _write(plans, runs, out_dir, sweep, report, dataset, target, published)
    if json_output:
        print(json.dumps(summaries[0] if not sweep else {"dataset": str(dataset), "target": target, "runs": summaries}))
    else:
        from omnicli.bench.tables import print_tables

        print_tables(summaries, sys.stdout, published=published)
    if any(s["scored"] == 0 for s in summaries):
        raise OmniError("no utterance could be scored (see the failures above)")
    _gates(summaries, max_wer, fail_if_worse, sweep)


def _gates(summaries: list[dict], max_wer: float | None, fail_if_worse: bool, sweep: bool) -> None:
    """--max-wer (exit 3) and --fail-if-worse (exit 4): each failure one line, then the exit."""
    from omnicli.bench.compare import worse_figures
    from omnicli.bench.tables import level_name

    above = [s for s in summaries if max_wer is not None and s["wer_mean"] is not None and s["wer_mean"] > max_wer]
    for s in above:
        where = f" at {level_name(s)}" if sweep else ""
        note(f"omni: mean WER {s['wer_mean']:.4f}{where} is above --max-wer {max_wer}")
    worse = [(s, line) for s in summaries if fail_if_worse for line in worse_figures(s["ab"])]
    for s, line in worse:
        note(f"omni: {line}{f' at {level_name(s)}' if sweep else ''}")
    if above:
        raise typer.Exit(WER_GATE_EXIT)
    if worse:
        raise typer.Exit(WORSE_THAN_BASELINE_EXIT)


def _levels(concurrency: str | None, rate: float | None) -> list[Level]:
    """The runs asked for: one per --concurrency value, each at --rate (if any)."""
    if rate is not None and not rate > 0:
        raise UsageError(f"--rate must be above 0 requests a second, got {rate:g}")
    if concurrency is None:
        return [Level(None if rate is not None else 1, rate)]
    values = []
    for piece in concurrency.split(","):
        try:
            value = int(piece.strip())
        except ValueError:
            value = 0
        if not 1 <= value <= MAX_CONCURRENCY:
            raise UsageError(f"--concurrency takes whole numbers from 1 to {MAX_CONCURRENCY}, separated by commas; got {concurrency!r}")
        if value in values:
            raise UsageError(f"--concurrency names {value} twice")
        values.append(value)
    return [Level(value, rate) for value in values]


def _judge_connection(asr_server: str | None, connection):
    """The Whisper server that judges (--asr-server), reached with the run's key and timeout."""
    if not asr_server:
        return None
    from omnicli.config import Connection, server_url

    return Connection(server_url(asr_server, "--asr-server"), connection.api_key, connection.timeout)


async def _run(plans: list[Plan], factory, connection, judge, options, scoring_only: bool, choice=None,
               extra=None) -> None:
    """Every level in turn, on one engine (and one pool of servers, checked once)."""
    from omnicli.bench.runner import warm_up
    from omnicli.cli.engines import EngineChoice

    engine = pool = None
    try:
        await judge.preload()
        if extra is not None:
            await extra.preload()
        if not scoring_only:
            if connection.server:
                engine = pool = factory.pool(connection, stream="audio")
            else:
                engine = factory.engine(choice or EngineChoice(connection, speech_stream="audio"))
            await engine.check()
            if first := next((plan.todo[0] for plan in plans if plan.todo), None):
                await warm_up(first, engine, options, requests=pool.servers_up if pool is not None else 1)
                if pool is not None:
                    pool.take_figures()  # the warm-up is not the run's
        for plan in plans:
            await _run_level(plan, engine, judge, replace(options, concurrency=plan.level.concurrency,
                                                           rate=plan.level.rate, keep_audio_dir=plan.keep_dir), extra)
            if scoring_only or not plan.todo:
                plan.duration = None  # nothing was synthesized: no serving figures
            elif pool is not None:
                plan.servers = pool.take_figures()
    finally:
        if engine is not None:
            await engine.aclose()
        await factory.release(judge)


async def _run_level(plan: Plan, engine, judge, options, extra) -> None:
    from omnicli.bench.progress import BenchProgress
    from omnicli.bench.runner import run_bench

    with BenchProgress(len(plan.todo)) as progress:
        def record(entry: dict) -> None:
            plan.journal.append(entry)
            plan.records.append(entry)
            progress.update(entry)
            if entry["status"] != "ok":
                note(f"omni: {entry['utt']} (line {entry['line']}): {entry['status']}: {entry.get('error', '')}")

        plan.duration = await run_bench(plan.todo, engine, judge, options, record, extra)


def _records(plan: Plan, data) -> list[dict]:
    """The level's records for this dataset: earlier runs' (resumed) and this one's."""
    utts = {item.utt for item in data.items}
    return [r for r in plan.journal.records if r["utt"] in utts]


def _summary(plan: Plan, data, dataset: str, target: str) -> dict:
    from omnicli.bench.scoring import summarize
    from omnicli.bench.serving import serving_figures

    summary = summarize(_records(plan, data))
    summary["malformed_lines"] = len(data.malformed)
    summary["dataset"] = str(dataset)
    summary["target"] = target
    if plan.duration is not None:
        summary |= serving_figures(plan.records, plan.duration, concurrency=plan.level.concurrency, rate=plan.level.rate)
    else:
        summary |= {"max_concurrency": plan.level.concurrency, "request_rate": plan.level.rate}
    if plan.servers is not None:
        summary["servers"] = plan.servers
    return summary


def _write(plans: list[Plan], runs: list[tuple[dict, list[dict]]], out_dir: Path | None, sweep: bool,
           report: str | None, dataset: str, target: str, published: bool = False) -> None:
    """summary.json (per level, and the sweep's in --out) and the HTML report."""
    from omnicli.audio.atomic import atomic_write

    if out_dir is not None:
        for plan, (summary, _) in zip(plans, runs, strict=True):
            folder = out_dir / plan.level.folder if sweep else out_dir
            atomic_write(folder / "summary.json", (json.dumps(summary, indent=2) + "\n").encode())
        if sweep:
            whole = {"dataset": str(dataset), "target": target, "runs": [summary for summary, _ in runs]}
            atomic_write(out_dir / "summary.json", (json.dumps(whole, indent=2) + "\n").encode())
    if report:
        from omnicli.bench.report import render

        atomic_write(report, render(runs, title=f"omni bench-wer: {Path(dataset).name}", published=published).encode())
