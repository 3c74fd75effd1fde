"""Supervised phases: the warm-up, SSB's self-distillation, interleaved phases, weight interpolation."""
