"""The names DeFAb's settings accept, apart from the code behind them, so the CLI can list them in its
help without importing the engine."""

__all__ = ["DISTRACTOR_STRATEGIES", "GROUNDING_MODES", "LOGIC_VARIANTS"]

DISTRACTOR_STRATEGIES = ("none", "random", "syntactic", "adversarial", "mixed")  # rlvr.defab.distract
GROUNDING_MODES = ("full", "exhaustive", "relevant")  # rlvr.defab.ground
LOGIC_VARIANTS = ("standard", "defab")  # rlvr.defab.engine.VARIANTS
