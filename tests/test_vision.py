"""Vision-language models: image inputs through batches, the tiny VLM, prompt encoding, generation and
log-probs with images, local VLM directories, and image data files."""

import base64
import io
import json
import random

import numpy as np
import pytest
import torch
from PIL import Image

from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams
from rlvr.core.vision import BatchVision, VisionInputs
from rlvr.models import ModelConfig, TinyModelConfig, completion_logprobs, load_model
from rlvr.models.checks import ModelDirError
from rlvr.models.vision import ImageError, save_tokenizer, vision_of
from rlvr.models.prompts import encode_example, example_length
from rlvr.engines.hf import HFEngine

VLM = TinyModelConfig(arch="qwen2_vl", hidden_size=64, intermediate_size=128, num_layers=1, num_heads=4,
                      num_kv_heads=2, max_positions=128)


@pytest.fixture(scope="module")
def vlm():
    return load_model(ModelConfig(tiny=VLM), seed=5)


def _img(h, w, seed=0):
    rng = np.random.default_rng(seed)
    return Image.fromarray((rng.random((h, w, 3)) * 255).astype("uint8"))


# ---- BatchVision row bookkeeping against a naive per-row list ------------------------------------------

def _rows(rng, n, dim=6):
    rows = []
    for _ in range(n):
        k = rng.choice([0, 0, 1, 2])
        if not k:
            rows.append(None)
            continue
        grids = torch.tensor([[1, rng.randint(1, 3) * 2, rng.randint(1, 3) * 2] for _ in range(k)])
        rows.append(VisionInputs(torch.randn(int(grids.prod(-1).sum()), dim), grids))
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_batch_vision_select_equals_naive_concatenation(seed):
    rng = random.Random(seed)
    rows = _rows(rng, 9)
    bv = BatchVision.from_rows(rows)
    if bv is None:
        assert all(r is None for r in rows)
        return
    idx = [rng.randrange(9) for _ in range(rng.randint(1, 12))]  # repeats and any order
    sel = bv.select(torch.tensor(idx))
    picked = [rows[i] for i in idx if rows[i] is not None]
    if not picked:
        assert sel is None
        return
    assert torch.equal(sel.pixel_values, torch.cat([r.pixel_values for r in picked]))
    assert torch.equal(sel.image_grid_thw, torch.cat([r.image_grid_thw for r in picked]))
    assert sel.row_images.tolist() == [0 if rows[i] is None else rows[i].num_images for i in idx]
    for j, i in enumerate(idx):  # a row taken back out is the row put in
        back = sel.row(j)
        assert (back is None) == (rows[i] is None)
        if back is not None:
            assert torch.equal(back.pixel_values, rows[i].pixel_values)


def _tiled_rows(rng, n, side=4):
    """Idefics3-like rows: tiles per image vary (tiled, or the global view alone), with a pixel mask;
    or LLaVA / Gemma-3-like rows: one entry per image (crops included)."""
    rows = []
    for _ in range(n):
        k = rng.choice([0, 1, 1, 2])
        if not k:
            rows.append(None)
            continue
        tiles = sum(rng.choice([1, 3, 5]) for _ in range(k))
        rows.append(VisionInputs(tensors={"pixel_values": torch.randn(tiles, 3, side, side),
                                          "pixel_attention_mask": torch.rand(tiles, side, side) > 0.2},
                                 num_images=k))
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_batch_vision_select_keeps_every_named_tensor_of_each_row(seed):
    rng = random.Random(seed)
    rows = _tiled_rows(rng, 9)
    bv = BatchVision.from_rows(rows)
    if bv is None:
        return
    idx = [rng.randrange(9) for _ in range(rng.randint(1, 12))]
    sel = bv.select(torch.tensor(idx))
    picked = [rows[i] for i in idx if rows[i] is not None]
    if not picked:
        assert sel is None
        return
    for key in ("pixel_values", "pixel_attention_mask"):
        assert torch.equal(sel.tensors[key], torch.cat([r.tensors[key] for r in picked]))
        assert sel.row_counts[key].tolist() == [0 if rows[i] is None else rows[i].tensors[key].shape[0] for i in idx]
    assert sel.image_grid_thw is None and sel.row_images.tolist() == [0 if rows[i] is None else rows[i].num_images
                                                                      for i in idx]
    for j, i in enumerate(idx):
        back = sel.row(j)
        assert (back is None) == (rows[i] is None)
        if back is not None:
            assert back.num_images == rows[i].num_images
            assert all(torch.equal(back.tensors[k], rows[i].tensors[k]) for k in rows[i].tensors)


def test_rows_processed_differently_do_not_batch():
    a = VisionInputs(tensors={"pixel_values": torch.zeros(1, 3, 4, 4)}, num_images=1)
    b = VisionInputs(tensors={"pixel_values": torch.zeros(1, 3, 8, 8)}, num_images=1)
    c = VisionInputs(tensors={"pixel_values": torch.zeros(1, 3, 4, 4), "pixel_attention_mask": torch.ones(1, 4, 4)},
                     num_images=1)
    with pytest.raises(ValueError, match="different pixel_values shapes"):
        BatchVision.from_rows([a, b])
    with pytest.raises(ValueError, match="different image processors"):
        BatchVision.from_rows([a, None, c])
    with pytest.raises(ValueError, match="at least one image"):
        VisionInputs(tensors={"pixel_values": torch.zeros(1, 3, 4, 4)}, num_images=0)


def test_vision_inputs_reject_mismatched_grids():
    with pytest.raises(ValueError, match="patches"):
        VisionInputs(torch.zeros(5, 3), torch.tensor([[1, 2, 2]]))
    with pytest.raises(ValueError, match=r"\[images, 3\]"):
        VisionInputs(torch.zeros(4, 3), torch.tensor([1, 2, 2]))


# ---- prompt encoding -------------------------------------------------------------------------------------

def test_each_image_placeholder_expands_to_its_merged_patches(vlm):
    _, tok = vlm
    vp = vision_of(tok)
    sizes = [(32, 32), (48, 32), (17, 63), (200, 150)]  # odd sizes are resized; a large one is shrunk
    imgs = [_img(h, w, i) for i, (h, w) in enumerate(sizes)]
    ids, vis = vp.encode("a<image>b<image>c<image><image>?", imgs)
    merged = (vis.image_grid_thw.prod(-1) // vp.merge_size ** 2).tolist()
    runs, cur = [], 0
    for t in ids + [-1]:
        if t == vp.image_token_id:
            cur += 1
        elif cur:
            runs.append(cur)
            cur = 0
    assert runs == merged and len(runs) == 4
    assert all(hw[1] * hw[2] * 8 * 8 <= 64 * 64 for hw in vis.image_grid_thw.tolist())  # max_pixels holds
    assert tok.decode([t for t in ids if t < vp.vision_start_id]) == "abc?"
    for prompt, images in [("a<image>b<image>c<image><image>?", imgs), ("no marker", imgs[:2]), ("text", [])]:
        assert example_length(tok, Example("x", prompt, "1", images=tuple(images))) == \
            len(encode_example(tok, Example("x", prompt, "1", images=tuple(images)))[0])


def test_images_without_markers_open_the_prompt_and_marker_counts_must_match(vlm):
    _, tok = vlm
    vp = vision_of(tok)
    ids, _ = vp.encode("count:", [_img(32, 32)])
    assert ids[0] == vp.vision_start_id and tok.decode(ids[-6:]) == "count:"
    with pytest.raises(ImageError, match="2 <image> markers for 1 images"):
        vp.encode("<image><image>x", [_img(32, 32)])


def test_chat_prompts_render_image_parts_through_the_template(vlm):
    _, tok = vlm
    vp = vision_of(tok)
    tok.chat_template = ("{% for m in messages %}{% for p in m['content'] %}{% if p['type'] == 'image' %}"
                         "<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ p['text'] }}{% endif %}{% endfor %}"
                         "{% endfor %}{% if add_generation_prompt %}>{% endif %}")
    try:
        msgs = [{"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image"}]}]
        ids, vis = vp.encode(msgs, [_img(32, 32)])
        assert tok.decode([t for t in ids if t < vp.vision_start_id]) == "see>" and vis.num_images == 1
        assert ids.count(vp.image_token_id) == 4
        with pytest.raises(ImageError, match="0 image placeholders for 1 images"):
            vp.encode([{"role": "user", "content": [{"type": "text", "text": "no image part"}]}], [_img(32, 32)])
    finally:
        tok.chat_template = None


def test_unreadable_images_and_text_models_fail_clearly(vlm, tmp_path):
    _, tok = vlm
    vp = vision_of(tok)
    (tmp_path / "bad.png").write_bytes(b"not a png at all")
    for ref, msg in [(tmp_path / "missing.png", "does not exist"), (tmp_path / "bad.png", "cannot be read"),
                     (3, "PIL image or a file path")]:
        with pytest.raises(ImageError, match=msg):
            vp.encode("<image>x", [ref])
    text_tok = load_model(ModelConfig(tiny=TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1)))[1]
    with pytest.raises(ValueError, match="text-only"):
        encode_example(text_tok, Example("e", "<image>x", "1", images=(_img(32, 32),)))


# ---- generation and log-probs ---------------------------------------------------------------------------

def _examples():
    exs = [Example(f"i{k}", "<image>n?" + "x" * k, "1", images=(_img(32 + 16 * k, 32, k),)) for k in range(3)]
    exs.append(Example("two", "<image>and<image>?", "1", images=(_img(32, 48, 7), _img(32, 32, 8))))
    exs.append(Example("text", "plain text", "1"))
    return exs


def test_engine_behaviour_logprobs_equal_the_trainers_with_images(vlm):
    model, tok = vlm
    comps = HFEngine(model, tok).generate([GenerationRequest(e, 3) for e in _examples()],
                                          SamplingParams(temperature=1.0, max_new_tokens=6, seed=3))
    batch = build_batch(comps, [0.0] * len(comps), tok.pad_token_id)
    assert batch.vision.row_images.tolist() == [1] * 9 + [2] * 3 + [0] * 3
    with torch.no_grad():
        lp, _ = completion_logprobs(model, batch)
    diff = ((lp - batch.behaviour_logp) * batch.completion_mask).abs().max()
    assert diff < 1e-4
    # a row scored alone, or in any micro-batch, gets the same log-probs (left padding, patch bookkeeping)
    for idx in ([4], [13, 0, 10], list(range(14, -1, -2))):
        sub = batch.select(torch.tensor(idx)).trim()
        with torch.no_grad():
            lp_sub, _ = completion_logprobs(model, sub)
        assert torch.allclose(lp_sub, lp[idx, : lp_sub.shape[1]], atol=1e-5)


def test_the_image_changes_the_policy(vlm):
    model, tok = vlm
    a = Example("a", "<image>n?", "1", images=(_img(32, 32, 1),))
    b = Example("b", "<image>n?", "1", images=(_img(32, 32, 2),))
    rows = []
    for ex in (a, b):
        ids, vis = encode_example(tok, ex)
        rows.append(Completion(ex.id, ids, tok("123")["input_ids"], None, "stop", "123", vision=vis))
    batch = build_batch(rows, [0.0, 0.0], tok.pad_token_id)
    with torch.no_grad():
        lp, _ = completion_logprobs(model, batch)
    assert (lp[0] - lp[1]).abs().max() > 1e-4  # same text, different pixels


def test_gradients_reach_the_vision_tower(vlm):
    model, tok = vlm
    ex = _examples()[0]
    ids, vis = encode_example(tok, ex)
    batch = build_batch([Completion("x", ids, tok("12")["input_ids"], None, "stop", "12", vision=vis)], [1.0],
                        tok.pad_token_id)
    model.zero_grad()
    lp, _ = completion_logprobs(model, batch)
    lp.sum().backward()
    grads = [p.grad for n, p in model.named_parameters() if "visual" in n]
    assert grads and any(g is not None and g.abs().sum() > 0 for g in grads)
    model.zero_grad()


# ---- local VLM directories ------------------------------------------------------------------------------

def test_a_saved_vlm_directory_loads_back_as_the_same_model(vlm, tmp_path):
    model, tok = vlm
    model.save_pretrained(tmp_path / "m")
    save_tokenizer(tok, tmp_path / "m")
    loaded, tok2 = load_model(ModelConfig(path=str(tmp_path / "m")))
    ex = _examples()[3]
    ids, vis = encode_example(tok, ex)
    ids2, vis2 = encode_example(tok2, ex)
    assert ids == ids2 and torch.equal(vis.pixel_values, vis2.pixel_values)
    batch = build_batch([Completion("x", ids, tok("12")["input_ids"], None, "stop", "12", vision=vis)], [0.0],
                        tok.pad_token_id)
    with torch.no_grad():
        assert torch.allclose(completion_logprobs(model, batch)[0], completion_logprobs(loaded, batch)[0], atol=1e-6)
    (tmp_path / "m" / "preprocessor_config.json").unlink()
    with pytest.raises(ModelDirError, match="preprocessor_config.json"):
        load_model(ModelConfig(path=str(tmp_path / "m")))


# ---- image data files -----------------------------------------------------------------------------------

def test_jsonl_rows_with_image_paths_inline_images_and_chat_parts(tmp_path):
    from rlvr.tasks.dataset import DataError, DatasetParams, read_examples

    (tmp_path / "imgs").mkdir()
    _img(32, 32, 1).save(tmp_path / "imgs" / "a.png")
    buf = io.BytesIO()
    _img(16, 16, 2).save(buf, format="PNG")
    inline = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    rows = [{"prompt": "<image>n?", "answer": 1, "images": "imgs/a.png"},
            {"prompt": "<image><image>?", "answer": 2, "images": ["imgs/a.png", inline]},
            {"prompt": [{"role": "user", "content": [{"type": "image", "image": "imgs/a.png"},
                                                     {"type": "text", "text": "n?"}]}], "answer": 3},
            {"prompt": "no image", "answer": 4}]
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    exs = read_examples(data, DatasetParams(train_path=str(data)))
    assert exs[0].images == (str((tmp_path / "imgs" / "a.png").resolve()),)
    assert len(exs[1].images) == 2 and isinstance(exs[1].images[1], Image.Image) and exs[1].images[1].size == (16, 16)
    assert exs[2].prompt[0]["content"][0] == {"type": "image"} and len(exs[2].images) == 1
    assert exs[3].images == () and "images" not in exs[0].meta
    # a missing or corrupt image names its line, or is skipped
    (tmp_path / "imgs" / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(json.dumps(r) for r in [rows[0], {"prompt": "<image>", "answer": 1, "images": "imgs/no.png"},
                                                     {"prompt": "<image>", "answer": 1, "images": "imgs/bad.png"}]))
    with pytest.raises(DataError, match=r"bad.jsonl:2: image 'imgs/no.png' does not exist"):
        read_examples(bad, DatasetParams(train_path=str(bad)))
    kept = read_examples(bad, DatasetParams(train_path=str(bad), bad_images="skip"))
    assert [e.id for e in kept] == ["bad-1"]


def test_image_placeholder_tokens_are_never_sampled_and_have_no_probability(vlm):
    from rlvr.models.vision import suppressed_tokens
    from rlvr.passes.policy import token_statistics

    model, tok = vlm
    banned = set(suppressed_tokens(model))
    assert len(banned) == 4 and vision_of(tok).image_token_id in banned
    # a hot temperature spreads mass over the whole vocabulary: 4 of ~100 tokens would show up otherwise
    comps = HFEngine(model, tok).generate([GenerationRequest(_examples()[0], 64)],
                                          SamplingParams(temperature=4.0, max_new_tokens=8, seed=0))
    sampled = [t for c in comps for t in c.completion_ids]
    assert len(sampled) > 200 and not banned & set(sampled)
    batch = build_batch(comps, [0.0] * len(comps), tok.pad_token_id)
    stats = token_statistics(model, batch, 4.0, 16, 4096, ["logp", "entropy"])
    with torch.no_grad():
        lp, ent = completion_logprobs(model, batch, temperature=4.0, with_entropy=True)
    m = batch.completion_mask.bool()
    assert torch.allclose(stats["logp"][m], lp[m], atol=1e-5) and torch.allclose(stats["entropy"][m], ent[m], atol=1e-4)
    assert torch.isfinite(ent[m]).all()
    assert ((lp - batch.behaviour_logp).abs() * batch.completion_mask).max() < 1e-4


def test_vllm_image_prompts_and_suppression_helpers(vlm):
    """What the vllm engine sends (rlvr.engines.vllm_vision; no vLLM needed): one placeholder per image, which
    vLLM expands back to rlvr's ids, and the sampled token's raw log-prob renormalised over unsuppressed ones."""
    from types import SimpleNamespace

    from rlvr.models.vision import suppressed_tokens
    from rlvr.engines.vllm_vision import Suppression, collapse_placeholders, vllm_image_prompt

    model, tok = vlm
    vp = vision_of(tok)
    ex = _examples()[3]  # two images of different sizes
    ids, vis = encode_example(tok, ex)
    sent = vllm_image_prompt(ids, [7, 8], vis, vp)
    assert sent["prompt_token_ids"] == vp.render(ex.prompt, 2, False) + [7, 8]
    assert sent["multi_modal_data"]["image"]["pixel_values"] is vis.pixel_values
    per = (vis.image_grid_thw.prod(-1) // vp.merge_size ** 2).tolist()
    expanded = [t for i in sent["prompt_token_ids"][:-2] for t in ([i] * per.pop(0) if i == vp.image_token_id else [i])]
    assert expanded == ids and collapse_placeholders(ids, vis, vp.image_token_id, vp.merge_size) == vp.render(
        ex.prompt, 2, False)
    banned = suppressed_tokens(model)
    s = Suppression(banned, tok, len(tok), raw=False)
    assert s.kwargs == {"bad_words": tok.convert_ids_to_tokens(banned)}  # each one token, as vLLM re-encodes them
    raw = Suppression(banned, tok, len(tok), raw=True)
    assert raw.kwargs["logprob_token_ids"] == banned and raw.kwargs["logprobs"] == 4
    logits = torch.randn(len(tok))
    full = torch.log_softmax(logits, -1)
    position = {i: SimpleNamespace(logprob=full[i].item()) for i in [5, *banned]}
    masked = logits.clone()
    masked[banned] = -1e9
    assert abs(raw.logprob(position, 5) - torch.log_softmax(masked, -1)[5].item()) < 1e-5
    assert s.logprob(position, 5) == position[5].logprob  # processed log-probs come renormalised already
    odd = SimpleNamespace(convert_ids_to_tokens=lambda ids: ["ab"] * len(ids), encode=lambda t, **_: [1, 2])
    assert Suppression(banned, odd, 50, raw=False).kwargs == {"allowed_token_ids": [t for t in range(50)
                                                                                   if t not in banned]}
