"""A plain batch reward function, as users write them, for the JSONL custom-verifier test."""


def contains_answer(prompts, completions, answers, **kw):
    return [float(a in c) for c, a in zip(completions, answers)]


def shared_chars(prompts, completions, answers, **kw):
    """Partial credit: the fraction of the answer's characters present in the completion."""
    return [sum(ch in c for ch in a) / len(a) for c, a in zip(completions, answers)]


def constant_zero(prompts, completions, answers, **kw):
    """The same reward for every completion: every group is zero-variance."""
    return [0.0 for _ in completions]


def short(prompts, completions, **kw):
    """1 for a completion of at most 2 characters."""
    return [float(len(c) <= 2) for c in completions]


SEEN: list = []


def records(prompts, completions, completion_ids, step, **kw):
    """Records what it is given (the kinds of its arguments) and rewards every completion 1."""
    SEEN.append({"completions": completions, "completion_ids": completion_ids, "step": step})
    return [1.0 for _ in completions]
