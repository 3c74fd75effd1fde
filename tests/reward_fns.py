"""A plain batch reward function, as users write them, for the JSONL custom-verifier test."""


def contains_answer(prompts, completions, answers, **kw):
    return [float(a in c) for c, a in zip(completions, answers)]


def shared_chars(prompts, completions, answers, **kw):
    """Partial credit: the fraction of the answer's characters present in the completion."""
    return [sum(ch in c for ch in a) / len(a) for c, a in zip(completions, answers)]
