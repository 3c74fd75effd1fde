"""Every VLM family rlvr reads, as a local directory: LLaVA, LLaVA-NeXT, Gemma 3 (with and without pan-and-scan),
Idefics3 (tiled and not), SmolVLM, Qwen2.5-VL, Qwen3-VL (dense and MoE), InternVL, LLaVA-OneVision and
PaliGemma 2. Prompts encode exactly as the family's transformers processor encodes them and as the model
consumes them, the hf engine's behaviour log-probs equal the trainer's over mixed batches, image tokens are
never sampled, the image changes the policy, and what cannot be read is refused clearly."""

import copy
import json

import pytest
import torch
import transformers as tf

from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams
from rlvr.models import ModelConfig, completion_logprobs, load_model
from rlvr.models.checks import ModelDirError
from rlvr.models.vision import ImageError, suppressed_tokens, vision_forward_kwargs, vision_of
from rlvr.models.prompts import encode_example, example_length
from rlvr.engines.hf import HFEngine

from tests.vlm_tiny import img, save_family

CASES = {"llava": ("llava", {}), "llava_next": ("llava_next", {}), "gemma3": ("gemma3", {}),
         "gemma3_pan": ("gemma3", {"do_pan_and_scan": True, "pan_and_scan_min_crop_size": 8}),
         "idefics3": ("idefics3", {}), "idefics3_whole": ("idefics3", {"do_image_splitting": False}),
         "smolvlm": ("smolvlm", {}), "qwen2_5_vl": ("qwen2_5_vl", {}), "qwen3_vl": ("qwen3_vl", {}),
         "qwen3_vl_moe": ("qwen3_vl_moe", {}), "internvl": ("internvl", {}), "llava_onevision": ("llava_onevision", {}),
         "paligemma": ("paligemma", {})}
SIZES = [(32, 32), (40, 90), (70, 30), (17, 63), (200, 150), (65, 33), (100, 300)]


@pytest.fixture(scope="module", params=list(CASES))
def loaded(request, tmp_path_factory):
    family, processor = CASES[request.param]
    path = save_family(family, tmp_path_factory.mktemp(request.param), seed=3, **processor)
    model, tok = load_model(ModelConfig(path=str(path)))
    return request.param, model, tok


def _images_only(cls):
    """``cls``, a processor that also holds a video processor (which needs torchvision), built without one:
    its image path is transformers' own code, unchanged."""
    return type(cls.__name__, (cls,), {"check_argument_for_proper_class": lambda self, name, arg: None})


def _hf_processor(case, model, tok):
    """transformers' own processor of the family (with a PIL image processor; no video processor)."""
    ip = vision_of(tok).image_processor
    cfg = model.config
    if case in ("qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"):
        cls = tf.Qwen2_5_VLProcessor if case == "qwen2_5_vl" else tf.Qwen3VLProcessor
        return _images_only(cls)(image_processor=ip, tokenizer=tok, video_processor=None)
    if case == "internvl":
        return _images_only(tf.InternVLProcessor)(image_processor=ip, tokenizer=tok, video_processor=None,
                                                  image_seq_length=vision_of(tok).seq)
    if case == "llava_onevision":
        side = cfg.vision_config.image_size // cfg.vision_config.patch_size
        return _images_only(tf.LlavaOnevisionProcessor)(
            image_processor=ip, tokenizer=tok, video_processor=None, num_image_tokens=side ** 2,
            vision_feature_select_strategy=cfg.vision_feature_select_strategy,
            vision_aspect_ratio=cfg.vision_aspect_ratio)
    if case == "paligemma":  # it adds its location tokens to the tokenizer it is given
        return tf.PaliGemmaProcessor(image_processor=ip, tokenizer=copy.deepcopy(tok))
    if case in ("llava", "llava_next"):
        cls = tf.LlavaProcessor if case == "llava" else tf.LlavaNextProcessor
        return cls(image_processor=ip, tokenizer=tok, patch_size=8, num_additional_image_tokens=1,
                   vision_feature_select_strategy=model.config.vision_feature_select_strategy)
    if case.startswith("gemma3"):
        return tf.Gemma3Processor(image_processor=ip, tokenizer=tok, image_seq_length=model.config.mm_tokens_per_image)
    # SmolVLMProcessor needs a video processor (torchvision) and num2words; its image rule is Idefics3's
    return tf.Idefics3Processor(image_processor=ip, tokenizer=tok, image_seq_len=vision_of(tok).seq)


def _examples():
    exs = [Example(f"i{k}", "<image>n?" + "x" * k, "1", images=(img(32 + 24 * k, 32, k),)) for k in range(3)]
    exs.append(Example("two", "<image>and<image>?", "1", images=(img(32, 90, 7), img(70, 30, 8))))
    exs.append(Example("text", "plain text", "1"))
    return exs


def test_encoding_equals_the_family_processor_and_the_model_consumes_it(loaded):
    case, model, tok = loaded
    vp = vision_of(tok)
    hf = _hf_processor(case, model, tok)
    options = {"do_pan_and_scan": True, "pan_and_scan_min_crop_size": 8} if case == "gemma3_pan" else {}
    groups = [SIZES[k: k + 2] for k in range(len(SIZES))] + [[s] for s in SIZES[:-1]]  # two images, and one
    for k, sizes in enumerate(groups):
        images = [img(h, w, k + j) for j, (h, w) in enumerate(sizes)]
        prompt = "a<image>b" + "<image>c" * (len(images) - 1)
        ids, vis = vp.encode(prompt, images)
        text = prompt.replace("<image>", vp.image_token)
        ref = hf(text=[text], images=[images] if case == "llava_onevision" else images,  # one prompt's images
                 return_tensors="pt", **options)
        assert ref["input_ids"][0].tolist() == ids
        pixels = ref["pixel_values"][0] if case.startswith(("idefics3", "smolvlm")) else ref["pixel_values"]
        if case == "llava_next":  # [images, most patches, C, H, W] padded with zeros: rlvr keeps the real ones
            pixels = pixels[pixels.abs().sum((-1, -2, -3)) > 0]
        if case == "llava_onevision":  # [images, patches, C, H, W]: a prompt's single image, or its base views
            pixels = pixels.flatten(0, 1)
            assert ref["batch_num_images"].tolist() == [len(images)]
        assert torch.equal(pixels, vis.pixel_values)
        for key in ("image_sizes", "image_grid_thw"):
            if key in ref:
                assert torch.equal(ref[key], vis.tensors[key])
        if "pixel_attention_mask" in ref:
            assert torch.equal(ref["pixel_attention_mask"][0].bool(), vis.tensors["pixel_attention_mask"])
        ids_t = torch.tensor([ids])
        kw = vision_forward_kwargs(model, ids_t, vis)
        for key in ("token_type_ids", "mm_token_type_ids"):  # Gemma 3's soft tokens, Qwen's image tokens,
            if key in ref:  # PaliGemma's prompt (all prefix: 0)
                assert ref[key][0].tolist() == kw[key][0].tolist()
        ex = Example("x", prompt, "1", images=tuple(images))
        assert example_length(tok, ex) == len(ids)  # from the images' sizes alone
        with torch.no_grad():  # the model checks its image-token count against the features it computes
            model(input_ids=ids_t, **kw)


def test_engine_behaviour_logprobs_equal_the_trainers_in_mixed_batches(loaded):
    _, model, tok = loaded
    exs = _examples()
    comps = HFEngine(model, tok).generate([GenerationRequest(e, 2) for e in exs],
                                          SamplingParams(temperature=1.0, max_new_tokens=5, seed=3))
    batch = build_batch(comps, [0.0] * len(comps), tok.pad_token_id)
    assert batch.vision.row_images.tolist() == [1] * 6 + [2] * 2 + [0] * 2
    with torch.no_grad():
        lp, ent = completion_logprobs(model, batch, with_entropy=True)
    m = batch.completion_mask.bool()
    assert ((lp - batch.behaviour_logp).abs() * batch.completion_mask).max() < 1e-4
    assert torch.isfinite(ent[m]).all()
    for idx in ([6], [9, 0, 7], list(range(9, -1, -2))):  # a row scored alone or in any micro-batch
        sub = batch.select(torch.tensor(idx)).trim()
        with torch.no_grad():
            lp_sub, _ = completion_logprobs(model, sub)
        assert torch.allclose(lp_sub, lp[idx, : lp_sub.shape[1]], atol=1e-5)


def test_image_tokens_are_never_sampled(loaded):
    case, model, tok = loaded
    banned = set(suppressed_tokens(model))
    vp = vision_of(tok)
    assert vp.image_token_id in banned
    expect = {"gemma3": 3, "gemma3_pan": 3, "llava": 1, "llava_next": 1, "qwen2_5_vl": 4, "qwen3_vl": 4,
              "qwen3_vl_moe": 4, "internvl": 3, "llava_onevision": 2, "paligemma": 1}.get(case, 2 + 36 + 1)
    assert len(banned) == expect  # Idefics3: <image>, <fake_token_around_image>, <global-img>, 6 x 6 row/col
    comps = HFEngine(model, tok).generate([GenerationRequest(_examples()[0], 24)],
                                          SamplingParams(temperature=6.0, max_new_tokens=8, seed=0))
    sampled = [t for c in comps for t in c.completion_ids]
    assert len(sampled) > 150 and not banned & set(sampled)
    batch = build_batch(comps, [0.0] * len(comps), tok.pad_token_id)
    with torch.no_grad():
        lp, _ = completion_logprobs(model, batch, temperature=6.0)
    assert ((lp - batch.behaviour_logp).abs() * batch.completion_mask).max() < 1e-4


def test_the_image_changes_the_policy_and_gradients_reach_the_vision_tower(loaded):
    _, model, tok = loaded
    rows = []
    for seed in (1, 2):
        ex = Example(f"s{seed}", "<image>n?", "1", images=(img(32, 32, seed),))
        ids, vis = encode_example(tok, ex)
        rows.append(Completion(ex.id, ids, tok("123")["input_ids"], None, "stop", "123", vision=vis))
    batch = build_batch(rows, [0.0, 0.0], tok.pad_token_id)
    model.zero_grad()
    lp, _ = completion_logprobs(model, batch)
    assert (lp[0] - lp[1]).abs().max() > 1e-4  # same text, different pixels
    lp.sum().backward()
    tower = [p.grad for n, p in model.named_parameters() if "vision" in n or "visual" in n]
    assert tower and any(g is not None and g.abs().sum() > 0 for g in tower)
    model.zero_grad()


def test_gemma3_reads_each_image_bidirectionally_through_token_type_ids(loaded):
    case, model, tok = loaded
    if not case.startswith("gemma3"):
        pytest.skip("Gemma 3 only")
    ids, vis = encode_example(tok, _examples()[0])
    t = torch.tensor([ids])
    kw = vision_forward_kwargs(model, t, vis)
    assert kw["token_type_ids"].sum() == model.config.mm_tokens_per_image
    with torch.no_grad():
        with_types = model(input_ids=t, **kw).logits
        causal = model(input_ids=t, pixel_values=kw["pixel_values"]).logits
    assert (with_types - causal).abs().max() > 1e-5  # without them the image is read causally


def test_paligemma_reads_its_prompt_as_a_bidirectional_prefix_and_the_completion_causally(loaded):
    from rlvr.models.logprobs import forward_inputs, logit_softcap

    case, model, tok = loaded
    if case != "paligemma":
        pytest.skip("PaliGemma only")
    assert logit_softcap(model) == 3.0  # PaliGemma 2's cap lives in its text config
    engine, sampling = HFEngine(model, tok), SamplingParams(temperature=1.0, max_new_tokens=4, seed=5)
    exs = _examples()
    first = engine.generate([GenerationRequest(e, 1) for e in exs], sampling)
    # continued prefixes are completion tokens: causal in the engine as in the trainer
    reqs = [GenerationRequest(e, 2, prefix_ids=tuple(c.completion_ids[:2]), prefix_logprobs=tuple(c.logprobs[:2]))
            for e, c in zip(exs, first)]
    comps = engine.generate(reqs, sampling)
    batch = build_batch(comps, [0.0] * len(comps), tok.pad_token_id)
    kw = forward_inputs(model, batch)
    cols = torch.arange(batch.input_ids.shape[1])[None].expand_as(batch.input_ids)
    assert torch.equal(kw["token_type_ids"], (cols >= batch.prompt_len).long())  # 1 on the completion only
    assert torch.equal(kw["position_ids"], batch.position_ids + 1)  # PaliGemma counts positions from 1
    with torch.no_grad():
        lp, _ = completion_logprobs(model, batch)
        causal = model(**{k: v for k, v in kw.items() if k != "token_type_ids"}).logits
        prefix = model(**kw).logits
    assert ((lp - batch.behaviour_logp).abs() * batch.completion_mask).max() < 1e-4
    assert (prefix - causal).abs().max() > 1e-3  # without the types the prompt would be read causally
    ids = vision_of(tok).encode("<image>n?", [img(32, 32)])[0]
    assert tok.decode(ids[-4:]) == "<bos>n?\n" and ids[:16] == [model.config.image_token_id] * 16


def test_a_saved_directory_loads_back_with_the_same_encoding(loaded, tmp_path):
    from rlvr.models.vision import save_tokenizer

    case, model, tok = loaded
    model.save_pretrained(tmp_path / "m")
    save_tokenizer(tok, tmp_path / "m")
    again, tok2 = load_model(ModelConfig(path=str(tmp_path / "m")))
    assert type(again) is type(model) and type(vision_of(tok2)) is type(vision_of(tok))
    ex = _examples()[3]
    (ids, vis), (ids2, vis2) = encode_example(tok, ex), encode_example(tok2, ex)
    assert ids == ids2 and all(torch.equal(vis.tensors[k], vis2.tensors[k]) for k in vis.tensors)
    assert suppressed_tokens(again) == suppressed_tokens(model)


# ---- adversarial prompts and directories ------------------------------------------------------------------

def test_marker_counts_chat_parts_and_stray_image_tokens_fail_clearly(loaded):
    case, _, tok = loaded
    vp = vision_of(tok)
    with pytest.raises(ImageError, match="2 <image> markers for 1 images"):
        vp.encode("<image><image>x", [img(32, 32)])
    ids, _ = vp.encode("count:", [img(32, 32)])  # without a marker the image opens the prompt
    end = "count:\n" if case == "paligemma" else "count:"  # PaliGemma's prompt ends with a newline
    assert tok.decode(ids[-len(end):]) == end and ids.count(vp.image_token_id) > 0
    if case.startswith("gemma3"):  # elsewhere the feature token is the <image> marker itself
        with pytest.raises(ImageError, match="image placeholders for 1 images"):
            vp.encode(f"<image>{vp.image_token}x", [img(32, 32)])
        with pytest.raises(ImageError, match="image feature tokens"):  # the prompt's own text claims features
            vp.encode(f"<image>{vp.feature_token}x", [img(32, 32)])


def test_chat_prompts_render_image_parts_through_the_template(loaded):
    _, _, tok = loaded
    vp = vision_of(tok)
    tok.chat_template = ("{% for m in messages %}{% for p in m['content'] %}{% if p['type'] == 'image' %}"
                         + vp.image_token + "{% else %}{{ p['text'] }}{% endif %}{% endfor %}{% endfor %}"
                         "{% if add_generation_prompt %}>{% endif %}")
    try:
        msgs = [{"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image"}, {"type": "text",
                                                                                                 "text": "?"}]}]
        ids, vis = vp.encode(msgs, [img(40, 32)])
        assert ids == vp.encode("see<image>?>", [img(40, 32)])[0] and vis.num_images == 1
        ex = Example("c", msgs, "1", images=(img(40, 32),))
        assert example_length(tok, ex) == len(ids)
        with pytest.raises(ImageError, match="0 image placeholders for 1 images"):
            vp.encode([{"role": "user", "content": [{"type": "text", "text": "no image part"}]}], [img(32, 32)])
    finally:
        tok.chat_template = None


def test_unsupported_families_are_refused_at_load_naming_the_supported_ones(tmp_path):
    path = save_family("llava", tmp_path / "m")
    cfg = json.loads((path / "config.json").read_text())
    cfg["model_type"] = "mllama"
    (path / "config.json").write_text(json.dumps(cfg))
    supported = ("gemma3, idefics3, internvl, llava, llava_next, llava_onevision, paligemma, qwen2_5_vl, qwen2_vl, "
                 "qwen3_vl, qwen3_vl_moe, smolvlm")
    with pytest.raises(ModelDirError, match=rf"'mllama'.*{supported}"):
        load_model(ModelConfig(path=str(path)))


def test_a_llava_with_an_unknown_vision_tower_is_refused(tmp_path):
    from rlvr.models.vision import VisionProcessor
    from tests.vlm_tiny import build

    model, tok, ip = build("llava")
    model.config.vision_config.model_type = "pixtral"
    with pytest.raises(ValueError, match="vision tower is one of clip_vision_model, siglip_vision_model"):
        VisionProcessor.for_model(model.config, ip, tok)


def test_vllm_refuses_other_families_at_set_up(loaded):
    from rlvr.engines.vllm import VLLMEngine, VLLMUnavailable

    case, model, tok = loaded
    if case == "qwen2_5_vl":
        pytest.skip("served by vllm (tests/test_vllm_engine.py)")
    with pytest.raises(VLLMUnavailable, match="Qwen2-VL family.*rollout.engine=hf"):
        VLLMEngine(model, tok)


def test_a_processors_chat_template_json_reaches_the_tokenizer(tmp_path):
    path = save_family("llava", tmp_path / "m")
    template = ("{% for m in messages %}USER: {% for p in m['content'] %}{% if p['type'] == 'image' %}<image>\n"
                "{% else %}{{ p['text'] }}{% endif %}{% endfor %}{% endfor %} ASSISTANT:")
    (path / "chat_template.json").write_text(json.dumps({"chat_template": template}))
    _, tok = load_model(ModelConfig(path=str(path)))
    assert tok.chat_template == template
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "n?"}]}]
    ids, vis = vision_of(tok).encode(msgs, [img(32, 32)])
    assert vis.num_images == 1 and tok.decode(ids, skip_special_tokens=True) == "USER: \nn? ASSISTANT:"
