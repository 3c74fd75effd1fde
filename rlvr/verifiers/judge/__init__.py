"""A judge model as a verifier (:mod:`rlvr.verifiers.judge.verifier`): an OpenAI-compatible endpoint or a local
model grades each completion against a rubric; batched, under deadlines, retried, cached and budgeted."""

from rlvr.verifiers.judge.verifier import (DEFAULT_RUBRIC, DEFAULT_TEMPLATE, PRESETS, CriterionJudge, JudgeParams,
                                          JudgeVerifier, build_judge, check_judge)

__all__ = ["JudgeParams", "JudgeVerifier", "DEFAULT_TEMPLATE", "DEFAULT_RUBRIC", "PRESETS", "CriterionJudge", "check_judge",
           "build_judge"]
