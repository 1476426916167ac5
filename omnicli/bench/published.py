"""Seed-TTS-eval figures other systems' makers published, for `bench-wer --published` to show beside a
run. Published, not measured here: their judges (Whisper-large-v3, Paraformer-zh, WavLM-large SIM)
and test sets (Seed-TTS-eval's test-en and test-zh) differ from a bench-wer run's.
"""

SOURCE = ("FunAudioLLM/CosyVoice README.md, 'Evaluation' (commit 88f6a8e2), "
          "https://github.com/FunAudioLLM/CosyVoice#evaluation")

PUBLISHED: list[dict] = [
    {"system": "Human (ground truth)", "test_en_wer": 2.14, "test_en_sim": 0.734, "test_zh_cer": 1.26, "test_zh_sim": 0.755},
    {"system": "Seed-TTS", "test_en_wer": 2.25, "test_en_sim": 0.762, "test_zh_cer": 1.12, "test_zh_sim": 0.796},
    {"system": "F5-TTS", "test_en_wer": 2.00, "test_en_sim": 0.647, "test_zh_cer": 1.52, "test_zh_sim": 0.741},
    {"system": "CosyVoice2", "test_en_wer": 2.57, "test_en_sim": 0.659, "test_zh_cer": 1.45, "test_zh_sim": 0.757},
    {"system": "Index-TTS2", "test_en_wer": 2.23, "test_en_sim": 0.706, "test_zh_cer": 1.03, "test_zh_sim": 0.765},
    {"system": "Fun-CosyVoice3-0.5B-2512", "test_en_wer": 2.24, "test_en_sim": 0.718, "test_zh_cer": 1.21, "test_zh_sim": 0.780},
]
"""Per system: test-en WER (%), test-en SIM, test-zh CER (%), test-zh SIM, as published."""

PUBLISHED_COLUMNS = ["system (published, not measured)", "test-en WER", "test-en SIM", "test-zh CER", "test-zh SIM"]


def published_rows() -> list[list[str]]:
    """The published figures as table rows."""
    return [[row["system"], f"{row['test_en_wer']:.2f} %", f"{row['test_en_sim']:.3f}",
             f"{row['test_zh_cer']:.2f} %", f"{row['test_zh_sim']:.3f}"] for row in PUBLISHED]
