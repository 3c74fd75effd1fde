"""A model directory with damaged weights: one message naming the file (or the tensor) and what is wrong, a
non-zero exit and no traceback, before any training; and the neighbours of each damage that must still load.
"""

import json
import shutil
import struct

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen2Config, Qwen2ForCausalLM
from typer.testing import CliRunner

from rlvr.cli.commands import app
from rlvr.models.checks import ModelDirError, check_weight_files, safetensors_problem
from rlvr.models.loading import ModelConfig, load_model
from rlvr.models.tiny import char_tokenizer

runner = CliRunner()
QUICK = ["--set", "train.steps=1", "--set", "task.num_eval=4", "--set", "rollout.prompts_per_step=2",
         "--set", "rollout.group_size=2", "--set", "rollout.max_new_tokens=4", "--set", "eval.report_greedy=false"]


def _model():
    tok = char_tokenizer()
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=1, num_key_value_heads=1, max_position_embeddings=64,
                      tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                      bos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    return Qwen2ForCausalLM(cfg), tok


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A good whole save and a good sharded one, copied by each test before it damages them."""
    root = tmp_path_factory.mktemp("saved")
    model, tok = _model()
    for name, kw in (("whole", {}), ("sharded", {"max_shard_size": "20KB"})):
        model.save_pretrained(root / name, **kw)
        tok.save_pretrained(root / name)
    return root


@pytest.fixture
def whole(saved, tmp_path):
    return shutil.copytree(saved / "whole", tmp_path / "m")


@pytest.fixture
def sharded(saved, tmp_path):
    return shutil.copytree(saved / "sharded", tmp_path / "m")


def _train(model_dir, tmp_path, *extra):
    return runner.invoke(app, ["train", "--set", f"model.path={model_dir}", *QUICK, "--out", str(tmp_path / "run"),
                               *extra])


def _refused(result, *phrases, code=2):
    """One clear message: the exit code, every phrase, no traceback, and no run work done."""
    out = result.output
    assert result.exit_code == code, out
    assert "Traceback" not in out and not isinstance(result.exception, (AssertionError, TypeError)), out
    for phrase in phrases:
        assert phrase in out, (phrase, out)
    assert len([ln for ln in out.splitlines() if ln.strip()]) <= 4, out  # one message (wrapped at most)


def _header_len(file):
    return struct.unpack("<Q", file.read_bytes()[:8])[0]


# --- truncated or corrupt safetensors --------------------------------------------------------------------

CUTS = {
    "half": lambda b, n: len(b) // 2,
    "header only": lambda b, n: 8 + n,
    "header length only": lambda b, n: 8,
    "inside the header": lambda b, n: 8 + n // 2,
    "3 bytes": lambda b, n: 3,
    "empty": lambda b, n: 0,
    "one byte short": lambda b, n: len(b) - 1,
}


@pytest.mark.parametrize("cut", list(CUTS))
def test_truncated_safetensors_is_named_before_any_work(whole, tmp_path, cut):
    f = whole / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[:CUTS[cut](data, _header_len(f))])
    result = _train(whole, tmp_path)
    _refused(result, "model.safetensors is truncated or corrupt", str(whole), "re-save or re-copy")
    assert not (tmp_path / "run" / "sft_model").exists() and not (tmp_path / "run" / "eval").exists()


def test_truncation_says_how_much_is_missing(whole):
    f = whole / "model.safetensors"
    data = f.read_bytes()
    n = _header_len(f)
    f.write_bytes(data[:8 + n + 1000])
    assert safetensors_problem(f) == f"the file has {8 + n + 1000:,} of the {len(data):,} bytes its header describes"
    f.write_bytes(data[:1000])
    assert safetensors_problem(f) == f"the file has 1,000 bytes, fewer than the {8 + n:,} its header alone would take"


@pytest.mark.parametrize("damage", ["json syntax", "header length", "not an object", "offsets past the end",
                                    "overlapping offsets", "bytes appended"])
def test_corrupt_safetensors_header(whole, tmp_path, damage):
    f = whole / "model.safetensors"
    data = bytearray(f.read_bytes())
    n = _header_len(f)
    header = json.loads(data[8:8 + n])
    if damage == "json syntax":
        data[9] = ord("#")
    elif damage == "header length":
        data[:8] = struct.pack("<Q", 10**12)
    elif damage == "bytes appended":  # (two copies written into one file, say)
        data += b"\x00" * 64
    else:
        if damage == "not an object":
            header = [1, 2]
        else:
            name = next(k for k in header if k != "__metadata__" and header[k]["data_offsets"][0] > 0)
            lo, hi = header[name]["data_offsets"]
            header[name]["data_offsets"] = [lo, hi + 10**6] if damage == "offsets past the end" else [0, hi - lo]
        raw = json.dumps(header).encode()
        raw += b" " * ((8 - len(raw) % 8) % 8)
        data = bytearray(struct.pack("<Q", len(raw)) + raw + data[8 + n:])
    f.write_bytes(bytes(data))
    _refused(_train(whole, tmp_path), "model.safetensors is truncated or corrupt", str(whole))


def test_eval_of_a_truncated_model_is_one_message(whole, tmp_path):
    f = whole / "model.safetensors"
    f.write_bytes(f.read_bytes()[:100])
    result = runner.invoke(app, ["eval", "--model", str(whole), "--set", "task.num_eval=2",
                                 "--output", str(tmp_path / "e.json")])
    _refused(result, "model.safetensors is truncated or corrupt")
    assert not (tmp_path / "e.json").exists()


# --- sharded saves ---------------------------------------------------------------------------------------


def test_a_missing_shard_is_named(sharded, tmp_path):
    shards = sorted(sharded.glob("model-*.safetensors"))
    assert len(shards) > 2
    shards[1].unlink()
    _refused(_train(sharded, tmp_path), f"model.safetensors.index.json names {len(shards)} shard files",
             f"1 is missing: {shards[1].name}")


def test_two_missing_shards_are_both_named(sharded):
    shards = sorted(sharded.glob("model-*.safetensors"))
    shards[0].unlink()
    shards[-1].unlink()
    with pytest.raises(ModelDirError, match=f"2 are missing: {shards[0].name}, {shards[-1].name}"):
        check_weight_files(sharded)


def test_a_truncated_shard_is_named(sharded, tmp_path):
    shard = sorted(sharded.glob("model-*.safetensors"))[-1]
    shard.write_bytes(shard.read_bytes()[:-5])
    _refused(_train(sharded, tmp_path), f"{shard.name} is truncated or corrupt")


@pytest.mark.parametrize("index", ["{bad json", "{}", '{"weight_map": {}}'])
def test_a_broken_shard_index(sharded, tmp_path, index):
    (sharded / "model.safetensors.index.json").write_text(index)
    _refused(_train(sharded, tmp_path), "model.safetensors.index.json")


def test_a_whole_sharded_save_still_loads(sharded):
    model, _ = load_model(ModelConfig(path=str(sharded)))
    assert sum(p.numel() for p in model.parameters()) > 0


# --- pytorch_model.bin -----------------------------------------------------------------------------------


@pytest.mark.parametrize("cut", ["half", "empty", "garbage"])
def test_a_damaged_pytorch_model_bin(whole, tmp_path, cut):
    state = load_file(str(whole / "model.safetensors"))
    (whole / "model.safetensors").unlink()
    torch.save(state, whole / "pytorch_model.bin")
    data = (whole / "pytorch_model.bin").read_bytes()
    load_model(ModelConfig(path=str(whole)))  # a whole one loads
    (whole / "pytorch_model.bin").write_bytes({"half": data[:len(data) // 2], "empty": b"", "garbage": b"x" * 99}[cut])
    _refused(_train(whole, tmp_path), "pytorch_model.bin is truncated or corrupt")


# --- NaN and infinite weights ----------------------------------------------------------------------------


def _poison(model_dir, **values):
    """Write ``values`` (tensor name -> (index, value)) into the saved weights."""
    f = model_dir / "model.safetensors"
    state = load_file(str(f))
    for name, (index, value) in values.items():
        state[name.replace("__", ".")][index] = value
    save_file(state, str(f), metadata={"format": "pt"})


def test_nan_weights_name_the_tensor_and_the_count(whole, tmp_path):
    _poison(whole, **{"model__layers__1__mlp__up_proj__weight": ((0, slice(0, 3)), float("nan"))})
    _refused(_train(whole, tmp_path), "tensor 'model.layers.1.mlp.up_proj.weight' in model.safetensors",
             "3 NaN values of 2,048")
    assert not (tmp_path / "run" / "sft_model").exists()


@pytest.mark.parametrize("value", [float("inf"), float("-inf")])
def test_infinite_weights_name_the_tensor(whole, tmp_path, value):
    _poison(whole, **{"model__layers__0__self_attn__k_proj__weight": ((2, 2), value)})
    _refused(_train(whole, tmp_path), "tensor 'model.layers.0.self_attn.k_proj.weight'", "1 infinite value of")


def test_nan_and_inf_in_two_tensors_name_the_first_and_count_the_rest(whole):
    _poison(whole, **{"model__layers__1__mlp__up_proj__weight": ((0, 0), float("nan")),
                      "model__norm__weight": ((1,), float("inf")),
                      "model__embed_tokens__weight": ((5, 5), float("nan"))})
    with pytest.raises(ModelDirError, match=r"'model.embed_tokens.weight' in model.safetensors has 1 NaN value of "
                                            r"3,168 \(and 2 more tensors with such values\)"):
        load_model(ModelConfig(path=str(whole)))


def test_nan_in_a_shard_names_the_shard(sharded):
    index = json.loads((sharded / "model.safetensors.index.json").read_text())["weight_map"]
    name = "model.layers.1.self_attn.o_proj.weight"
    shard = sharded / index[name]
    state = load_file(str(shard))
    state[name][0, 0] = float("nan")
    save_file(state, str(shard), metadata={"format": "pt"})
    with pytest.raises(ModelDirError, match=f"'{name}' in {index[name]} has 1 NaN value"):
        load_model(ModelConfig(path=str(sharded)))


def test_nan_weights_loaded_in_bfloat16_are_still_found(whole):
    _poison(whole, **{"model__layers__0__mlp__down_proj__weight": ((1, 1), float("nan"))})
    with pytest.raises(ModelDirError, match="down_proj.weight' in model.safetensors has 1 NaN value"):
        load_model(ModelConfig(path=str(whole), dtype="bfloat16"))


def test_huge_but_finite_weights_and_an_infinite_mask_buffer_load(whole):
    """Neighbours that are not damage: values near float32's limit, and a buffer holding -inf (an attention
    mask some models keep) are accepted; NaN in a buffer is not."""
    from rlvr.models.checks import check_finite

    _poison(whole, **{"model__norm__weight": ((0,), 3.0e38)})
    model, _ = load_model(ModelConfig(path=str(whole)))
    model.register_buffer("causal_mask", torch.full((4, 4), float("-inf")).triu(1), persistent=False)
    check_finite(model, whole)
    model.causal_mask[0, 0] = float("nan")
    with pytest.raises(ModelDirError, match=r"'causal_mask' \(computed by the model's code from config.json\) has "
                                            r"1 NaN value of 16"):
        check_finite(model, whole)


def test_nonfinite_counts_cover_every_chunk():
    from rlvr.models.checks import _count_nonfinite

    t = torch.zeros(10_000)
    t[[3, 5000, 9999]] = float("nan")
    t[[7, 8]] = float("inf")
    assert _count_nonfinite(t, chunk=1000) == (3, 2)
    assert _count_nonfinite(torch.zeros(3, 0)) == (0, 0)


# --- a good directory, and resuming from a damaged checkpoint ---------------------------------------------


def test_a_good_directory_trains_and_a_damaged_checkpoint_refuses_to_resume(whole, tmp_path):
    result = _train(whole, tmp_path, "--set", "sft.steps=0", "--set", "train.checkpoint_every=1")
    assert result.exit_code == 0, result.output
    ckpt = tmp_path / "run" / "checkpoints" / "step_000001" / "model" / "model.safetensors"
    assert ckpt.is_file()
    ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 3])
    result = runner.invoke(app, ["train", "--resume", str(tmp_path / "run"), "--set", "train.steps=2"])
    # the checkpoint's checksums catch it first (rlvr.core.integrity): named, with its size against the written one
    assert result.exit_code == 1 and "model/model.safetensors has" in result.output, result.output
    assert "every checkpoint" in result.output and "Traceback" not in result.output
    (ckpt.parents[1] / "checksums.json").unlink()  # a checkpoint from before checksums: the load check names it
    result = runner.invoke(app, ["train", "--resume", str(tmp_path / "run"), "--set", "train.steps=2"])
    _refused(result, "model.safetensors is truncated or corrupt", str(ckpt.parent))
