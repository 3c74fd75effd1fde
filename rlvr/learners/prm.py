"""PROPA's process reward model: a scalar score in [0, 1] for a question and the reasoning steps so far.

Jiang et al. 2025, PROPA, arXiv:2511.10279; code ``YanbeiJiang/PROPA`` (``create_RM_train_*_grpo.py`` builds
the data, ``rm_train.sh`` trains it, ``test/bestN_test_*.py`` searches with it). Its training rows come from
the MCTS trees of ``rollout.strategy: propa`` (:meth:`rlvr.rollout.strategies.propa.PROPAWrapper.prm_rows`): for every
node but the root, the question and the steps from the root to the node, labelled

    l = ln(1 + 10 Q) / ln 11,  Q = V / N     a visited node
    l = 0                                      an unvisited node with a sibling of nonzero Q (else skipped)

rlvr's model is a copy of the policy's trunk (taken when the strategy is built) with one linear head on the
last token's hidden state, s = sigmoid(w . h + b), trained with binary cross-entropy on the soft labels by its
own AdamW, after each step's search, on that step's rows. The reference fine-tunes a generative reward model
that writes the number as text (ms-swift); a regression head on the same input is the stated substitute.
It is saved in checkpoints (``prm/``) and read back by ``rlvr eval --search prm``
(:mod:`rlvr.eval.prm_search`).
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Sequence

from rlvr.core.batch import build_batch
from rlvr.core.optim_state import load_trained, save_trained, trained_meta
from rlvr.core.types import Completion
from rlvr.lazy import F, no_grad, torch
from rlvr.models.logprobs import trunk_hidden

__all__ = ["ProcessRewardModel", "PRM_DIR"]

PRM_DIR = "prm"


class ProcessRewardModel:
    """A scorer of (prompt, steps) prefixes: ``score(rows)`` and ``update(rows, labels)``."""

    def __init__(self, model, pad_id: int, lr: float = 1e-5, weight_decay: float = 0.0, batch_size: int = 32,
                 epochs: int = 1):
        self.pad_id, self.batch_size, self.epochs = pad_id, batch_size, epochs
        trunk = copy.deepcopy(getattr(model, model.base_model_prefix))
        hidden = model.get_output_embeddings().in_features
        head = torch.nn.Linear(hidden, 1)
        with torch.no_grad():
            head.weight.zero_()
            head.bias.zero_()
        device = next(trunk.parameters()).device
        self.net = torch.nn.ModuleDict({"trunk": trunk, "head": head.to(next(trunk.parameters()).dtype)}).to(device)
        self.net.requires_grad_(True)
        self.lr, self.weight_decay = lr, weight_decay
        self.optimizer = torch.optim.AdamW(self.net.parameters(), lr=lr, weight_decay=weight_decay)

    @property
    def device(self):
        return next(self.net.parameters()).device

    def _logits(self, rows: Sequence[Completion]) -> torch.Tensor:
        batch = build_batch(list(rows), [0.0] * len(rows), self.pad_id).to(self.device).trim()
        h = trunk_hidden(self.net["trunk"], batch)
        last = batch.prompt_len + batch.lengths.clamp(min=1) - 1  # the last real token (a prompt-only row: its end)
        pooled = h[torch.arange(h.shape[0], device=h.device), last.to(h.device)]
        return self.net["head"](pooled).squeeze(-1).float()

    @no_grad
    def score(self, rows: Sequence[Completion], chunk: int = 64) -> list[float]:
        """``sigmoid(head)`` of each row's last token: its estimated chance of ending correct."""
        was = self.net.training
        self.net.eval()
        try:
            out: list[float] = []
            for s in range(0, len(rows), chunk):
                out += torch.sigmoid(self._logits(rows[s: s + chunk])).tolist()
            return out
        finally:
            self.net.train(was)

    def update(self, rows: Sequence[Completion], labels: Sequence[float], seed: int = 0) -> dict[str, float]:
        """``epochs`` passes over the rows in shuffled minibatches of ``batch_size``, BCE on the soft labels."""
        if not rows:
            return {}
        order = list(range(len(rows)))
        rng = random.Random(seed)
        losses = []
        self.net.train()
        for _ in range(self.epochs):
            rng.shuffle(order)
            for s in range(0, len(order), self.batch_size):
                idx = order[s: s + self.batch_size]
                target = torch.tensor([float(labels[i]) for i in idx], device=self.device)
                loss = F.binary_cross_entropy_with_logits(self._logits([rows[i] for i in idx]), target)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)
                self.optimizer.step()
                losses.append(float(loss.detach()))
        return {"prm/loss": sum(losses) / len(losses), "prm/rows": float(len(rows))}

    # ---- files -----------------------------------------------------------------------------------------

    def save(self, folder: str | Path) -> None:
        """``folder/prm/``: the weights, the optimizer state and the settings (safetensors and JSON)."""
        out = Path(folder) / PRM_DIR
        out.mkdir(parents=True, exist_ok=True)
        save_trained(out, "prm", self.net, self.optimizer, lr=self.lr, batch_size=self.batch_size, epochs=self.epochs)

    def load(self, folder: str | Path, optimizer: bool = True) -> None:
        """Read what :meth:`save` wrote into ``folder`` (a checkpoint, or its ``prm/``)."""
        src = Path(folder)
        src = src if (src / "prm.safetensors").is_file() else src / PRM_DIR
        meta = trained_meta(src, "prm")
        if meta is None:
            raise FileNotFoundError(f"{folder} holds no process reward model ({PRM_DIR}/prm.safetensors): it was "
                                    "written by a run without rollout.strategy propa's prm")
        load_trained(src, "prm", self.net, self.optimizer if optimizer else None, meta)
