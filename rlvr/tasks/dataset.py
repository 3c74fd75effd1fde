"""``dataset`` (and its alias ``jsonl``): a task from users' local data files.

Formats: JSON lines (``.jsonl``/``.json``), parquet (``.parquet``, needs ``pyarrow``) and a dataset saved
with the ``datasets`` library's ``save_to_disk`` (a directory; needs ``datasets``), detected from the path
or set with ``format``. Each row needs a prompt and a gold answer; field names are mapped in config.
``prompt`` is a string or a list of chat messages; ``answer`` is a string or number; an optional ``id`` is
kept (default ``<file stem>-<row>``); an optional ``completion`` is the supervised target; every other
field goes to ``Example.meta`` for verifiers that need structured gold data (tests, tables, databases).
Errors name the file and line (JSONL) or row. Without ``eval_path``, ``eval_fraction`` of the train file is
held out with ``data_seed``.

Images (for a vision-language model): ``images_field`` holds one image or a list, each a path relative to
the data file (or absolute) or an inline ``data:image/...;base64,...`` URI; chat prompts may instead carry
them as ``{"type": "image", "image": ...}`` content parts. Every image is opened and checked when the data
is read; a missing or corrupt one is an error naming its line, or with ``bad_images: skip`` the row is
left out and counted in one warning.

``faithfulness: true`` adds FGRPO's rule-based ``consistency`` and ``grounding`` score components (weight 0;
:mod:`rlvr.verifiers.faithfulness`); a row's scene field (``layout`` or ``objects``, kept in ``meta``) is what
the grounding check reads.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any, Iterator, Literal

from pydantic import Field, ValidationError, model_validator

from rlvr.core.paths import LocalPathStr
from rlvr.config.errors import format_params_error
from rlvr.core.types import Example
from rlvr.registry import Params, RegistryError
from rlvr.tasks.base import TASKS, Task, WeightedVerifier
from rlvr.verifiers import VERIFIERS, build_verifier, from_callable
from rlvr.verifiers.base import params_model_of
from rlvr.verifiers.faithfulness import faithfulness_checks

__all__ = ["DatasetParams", "JsonlParams", "RewardFunction", "dataset_task", "read_examples", "read_jsonl_examples", "split_holdout",
           "DataError"]


class DataError(ValueError):
    """A malformed data file; the message names the file and line or row."""


class RewardFunction(Params):
    """One reward of a list (``task.rewards``): a registered verifier or a user's function, and its weight."""

    fn: str = Field(..., description="a registered verifier name, or 'package.module:function' / 'file.py:function' "
                                     "for a reward function (prompts, completions, **kw) -> floats")
    weight: float = Field(1.0, description="its weight in the task's reward (a weighted sum)")
    params: dict[str, Any] = Field(default_factory=dict, description="params of a registered verifier")
    name: str | None = Field(None, description="its name in the metrics (default: the function's or verifier's)")

    @model_validator(mode="after")
    def _check(self) -> "RewardFunction":
        _check_reward(self.fn, self.params)
        return self

    def local_path_params(self) -> dict[str, Any]:
        """``params`` are the verifier's: its local paths resolve like the config's (rlvr.core.paths)."""
        return {"params": params_model_of(self.fn)}


def _check_reward(spec: str, params: dict[str, Any], label: str = "params of verifier {spec!r}") -> None:
    """A user's function is found and imported now (not after the model loads); a verifier's params validated."""
    if ":" in spec:
        from rlvr.verifiers.base import load_callable

        load_callable(spec)  # (ValueError: what is missing, where it was looked for)
        return
    try:
        entry = VERIFIERS.get(spec)
    except RegistryError as e:
        raise ValueError(str(e)) from None
    try:
        entry.params.model_validate(params)
    except ValidationError as e:
        raise ValueError(format_params_error(label.format(spec=spec), entry.params, e)) from None


def _build_reward(rf: RewardFunction):
    if ":" in rf.fn:
        from rlvr.verifiers.base import load_callable

        fn = load_callable(rf.fn)
        return from_callable(fn, rf.name or getattr(fn, "__name__", rf.fn))
    verifier = build_verifier(rf.fn, rf.params)
    if rf.name:  # its score component and metrics go by this name (two judges: consistency and grounding)
        try:
            verifier.name = rf.name
        except (AttributeError, TypeError):  # a verifier whose name cannot be set: a renamed view of it
            verifier = _Renamed(verifier, rf.name)
    return verifier


class _Renamed:
    """A verifier under another name; everything else is the verifier's."""

    def __init__(self, verifier: Any, name: str):
        self._verifier, self.name = verifier, name

    def __getattr__(self, key: str) -> Any:
        return getattr(self._verifier, key)

    def __call__(self, example: Example, text: str) -> Any:
        return self._verifier(example, text)


class DatasetParams(Params):
    train_path: LocalPathStr = Field(..., description="training data: a .jsonl/.parquet file or a save_to_disk directory")
    eval_path: LocalPathStr | None = Field(None, description="held-out data in the same formats")
    eval_fraction: float = Field(0.1, ge=0.0, lt=1.0, description="held out from train_path when eval_path is unset")
    format: Literal["auto", "jsonl", "parquet", "hf"] = Field("auto", description="file format (auto: from the path)")
    hf_split: str | None = Field(None, description="split of a saved DatasetDict (default: its only split)")
    prompt_field: str = Field("prompt", description="field holding the prompt")
    answer_field: str = Field("answer", description="field holding the gold answer")
    id_field: str = Field("id", description="field holding a stable example id (optional in the data)")
    completion_field: str = Field("completion", description="field holding a supervised target (optional)")
    verifier: str = Field("numeric", description="a registered verifier name, or 'package.module:function' "
                                                  "for a reward function (prompts, completions, **kw) -> floats")
    verifier_params: dict[str, Any] = Field(default_factory=dict, description="params of the named verifier")
    rewards: list[RewardFunction] = Field(default_factory=list, description="several rewards instead of verifier: "
                                          "[{fn, weight, params, name}], the task's reward their weighted sum, each "
                                          "one's mean and spread logged per step (reward/NAME); the first decides "
                                          "correctness")
    images_field: str = Field("images", description="field holding a row's image paths (optional in the data)")
    bad_images: Literal["error", "skip"] = Field("error", description="a missing or corrupt image: fail, or skip its row")
    data_seed: int = Field(0, description="seed of the eval hold-out")
    name: str = Field("jsonl", description="task name used in metrics")
    faithfulness: bool = Field(False, description="add FGRPO's rule-based consistency and grounding score "
                                                  "components (weight 0; rlvr.verifiers.faithfulness)")

    @model_validator(mode="after")
    def _check_verifier(self) -> "DatasetParams":
        if self.rewards:
            default = type(self).model_fields["verifier"].default
            if self.verifier != default or self.verifier_params:  # (a written config.yaml holds the defaults)
                raise ValueError("give either verifier (one reward) or rewards (a list), not both")
            names = [r.name or r.fn.rpartition(":")[2] for r in self.rewards]
            if len(set(names)) != len(names):
                raise ValueError(f"rewards: two rewards share a name ({names}); set name: for each")
            return self
        # a user's reward function is found and imported now, not after the model loads
        _check_reward(self.verifier, self.verifier_params, "verifier_params of {spec!r}")
        return self

    def local_path_params(self) -> dict[str, Any]:
        """``verifier_params`` are the verifier's: a reward model's or judge's ``path`` resolves like the
        config's own paths (beside the config file, else in the working directory; rlvr.core.paths)."""
        return {"verifier_params": params_model_of(self.verifier)}


JsonlParams = DatasetParams


def _format(path: Path, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    if path.is_dir():
        return "hf"
    return "parquet" if path.suffix == ".parquet" else "jsonl"


def _jsonl_rows(path: Path) -> Iterator[tuple[str, int, Any]]:
    # bytes, decoded line by line: a text-mode reader decodes ahead and would blame the wrong line
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, start=1):
            where = f"{path}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
            if not line.strip():
                continue
            try:
                yield where, lineno, json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{where}: invalid JSON ({e.msg} at column {e.colno})") from None


def _table_rows(path: Path, fmt: str, split: str | None) -> Iterator[tuple[str, int, Any]]:
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            rows = pq.read_table(path).to_pylist()
        else:
            import datasets

            ds = datasets.load_from_disk(str(path))
            if isinstance(ds, datasets.DatasetDict):
                if split is None and len(ds) != 1:
                    raise DataError(f"{path}: a DatasetDict with splits {list(ds)}; set task.hf_split")
                ds = ds[split or next(iter(ds))]
            rows = ds.to_list()
    except ImportError as e:
        raise DataError(f"{path}: reading {fmt} needs the optional extra rlvr[data] ({e.name} is missing)") from None
    for i, row in enumerate(rows):
        yield f"{path} row {i}", i, row


def require_fields(where: str, row: Any, keys: tuple[str, ...]) -> None:
    """A data row must be a JSON object holding ``keys``; else a :class:`DataError` naming ``where``."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    for key in keys:
        if key not in row:
            raise DataError(f"{where}: missing field {key!r} (fields: {sorted(row)})")


class _BadImage(DataError):
    """A row whose image is missing or unreadable (skipped with ``bad_images: skip``)."""


def _open_image(where: str, ref: Any, base: Path) -> Any:
    """A checked image: an absolute path string, or the decoded image of a ``data:`` URI."""
    import base64
    import binascii
    import io

    from PIL import Image, UnidentifiedImageError

    if not isinstance(ref, str) or not ref:
        raise _BadImage(f"{where}: an image must be a path or a data: URI, got {type(ref).__name__}")
    try:
        if ref.startswith("data:"):
            head, _, data = ref.partition(",")
            if ";base64" not in head:
                raise _BadImage(f"{where}: an inline image must be base64 (data:image/...;base64,...)")
            im = Image.open(io.BytesIO(base64.b64decode(data, validate=True)))
            im.load()
            return im.convert("RGB")
        path = Path(ref).expanduser()
        path = path if path.is_absolute() else base / path
        if not path.is_file():
            raise _BadImage(f"{where}: image {ref!r} does not exist ({path})")
        with Image.open(path) as im:
            im.verify()
        return str(path.resolve())
    except (UnidentifiedImageError, OSError, ValueError, binascii.Error, SyntaxError) as e:
        if isinstance(e, _BadImage):
            raise
        raise _BadImage(f"{where}: image {ref[:80]!r} cannot be read ({type(e).__name__}: {e})") from None


def _row_images(where: str, row: dict, prompt: Any, p: DatasetParams, base: Path) -> tuple[Any, tuple]:
    """The prompt (chat image parts reduced to ``{"type": "image"}``) and the row's images in order."""
    refs: list[Any] = []
    if isinstance(prompt, list):
        msgs = []
        for m in prompt:
            if isinstance(m, dict) and isinstance(m.get("content"), list):
                parts = []
                for part in m["content"]:
                    if isinstance(part, dict) and part.get("type") == "image" and "image" in part:
                        refs.append(part["image"])
                        part = {"type": "image"}
                    parts.append(part)
                m = dict(m, content=parts)
            msgs.append(m)
        prompt = msgs
    field = row.get(p.images_field)
    if field is not None:
        if refs:
            raise DataError(f"{where}: images both in {p.images_field!r} and in the prompt's parts")
        refs = list(field) if isinstance(field, list) else [field]
    return prompt, tuple(_open_image(where, r, base) for r in refs)


def _example(where: str, row: Any, default_id: str, p: DatasetParams, base: Path = Path(".")) -> Example:
    require_fields(where, row, (p.prompt_field, p.answer_field))
    prompt, answer = row[p.prompt_field], row[p.answer_field]
    if not (isinstance(prompt, str) and prompt) and not (isinstance(prompt, list) and prompt):
        raise DataError(f"{where}: {p.prompt_field!r} must be a non-empty string or list of messages")
    if not isinstance(answer, (str, int, float)) or isinstance(answer, bool):
        raise DataError(f"{where}: {p.answer_field!r} must be a string or number")
    target = row.get(p.completion_field)
    prompt, images = _row_images(where, row, prompt, p, base)
    meta = {k: v for k, v in row.items() if k not in (p.prompt_field, p.answer_field, p.images_field)}
    return Example(str(row.get(p.id_field, default_id)), prompt, str(answer), p.name,
                   target if isinstance(target, str) else None, meta, images)


def read_examples(path: str | Path, p: DatasetParams) -> list[Example]:
    """Examples of one data file or saved dataset, validated row by row."""
    path = Path(path).expanduser()
    if not path.exists():
        raise DataError(f"{path}: no such file")
    fmt = _format(path, p.format)
    rows = _jsonl_rows(path) if fmt == "jsonl" else _table_rows(path, fmt, p.hf_split)
    out, skipped = [], []
    base = path.parent if path.is_file() else path
    for where, key, row in rows:
        try:
            out.append(_example(where, row, f"{path.stem}-{key}", p, base))
        except _BadImage as e:
            if p.bad_images == "error":
                raise DataError(f"{e} (set task.bad_images: skip to leave such rows out)") from None
            skipped.append(str(e))
    if skipped:
        print(f"{path}: skipped {len(skipped)} rows with bad images; the first: {skipped[0]}", file=sys.stderr)
    if not out:
        raise DataError(f"{path}: no examples")
    return out


read_jsonl_examples = read_examples


def split_holdout(examples: list[Example], fraction: float, seed: int) -> tuple[list[Example], list[Example]]:
    """``(train, eval)``: a seeded ``fraction`` of ``examples`` held out, order otherwise kept."""
    idx = list(range(len(examples)))
    random.Random(seed).shuffle(idx)
    held = set(idx[: int(round(len(examples) * fraction))])
    return ([e for i, e in enumerate(examples) if i not in held], [e for i, e in enumerate(examples) if i in held])


def dataset_task(p: DatasetParams) -> Task:
    """Prompts and answers from local data files (JSONL, parquet, or a saved datasets directory)."""
    train = read_examples(p.train_path, p)
    if p.eval_path:
        evals = read_examples(p.eval_path, p)
    else:
        train, evals = split_holdout(train, p.eval_fraction, p.data_seed)
    if p.rewards:
        scored = [WeightedVerifier(_build_reward(r), r.weight) for r in p.rewards]
    else:
        verifier = build_verifier(p.verifier, p.verifier_params) if ":" not in p.verifier else from_callable(p.verifier)
        scored = [WeightedVerifier(verifier)]
    names = [wv.verifier.name for wv in scored]
    if len(set(names)) != len(names):
        raise ValueError(f"task.rewards: two rewards are named alike ({names}); give each a name:")
    checks = [WeightedVerifier(v, 0.0) for v in faithfulness_checks()] if p.faithfulness else []
    return Task(p.name, {"train": train, "eval": evals}, [*scored, *checks])


TASKS.register("dataset", DatasetParams)(dataset_task)
TASKS.register("jsonl", DatasetParams)(dataset_task)
