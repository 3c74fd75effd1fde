"""The ``eval`` and ``logging`` sections: held-out evaluation, and where metrics go besides ``metrics.jsonl``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.config.fields import Section
from rlvr.config.sections import EvalSearchConfig

__all__ = ["EvalConfig", "LoggingConfig"]


class EvalConfig(Section):
    split: str = Field("eval", description="task split to evaluate on")
    num_examples: int | None = Field(None, gt=0, description="evaluate on the first K examples (null: all)")
    temperature: float = Field(1.0, ge=0.0, description="sampling temperature; 0 is greedy decoding")
    samples: int = Field(4, gt=0, description="samples per prompt (accuracy is avg@samples); 1 when greedy")
    report_greedy: bool = Field(True, description="also report greedy accuracy when sampling")
    batch_size: int = Field(512, gt=0, description="sequences per generate call")
    search: EvalSearchConfig = Field(default_factory=EvalSearchConfig, description="plain sampling or PRM search")


class LoggingConfig(Section):
    """Where metrics go besides ``metrics.jsonl`` (always written)."""

    backends: list[Literal["jsonl", "tensorboard", "wandb", "mlflow"]] = Field(
        ["jsonl"], description="metric backends; jsonl is always on, the others need their pip extra")
    project: str = Field("rlvr", description="W&B project and MLflow experiment name")
    run_name: str | None = Field(None, description="run name in W&B and MLflow (default: the run directory's name)")
    wandb_mode: Literal["offline", "online", "disabled"] = Field(
        "offline", description="W&B mode; offline writes RUN_DIR/wandb for a later `wandb sync`")
    wandb_entity: str | None = Field(None, description="W&B entity (team or user)")
    mlflow_tracking_uri: str | None = Field(None, description="MLflow tracking URI (default: RUN_DIR/mlruns)")
    completions_every: int = Field(1, ge=0, description="every so many steps, a sample of the step's prompts, "
                                   "completions, rewards and advantages goes to RUN_DIR/completions.jsonl and the "
                                   "backends' tables (0: never)")
    completions_per_step: int = Field(8, ge=1, description="rows in each sample (whole groups first)")
