"""Answer markers nested or repeated: several ``\\boxed{}``, ``Answer:`` lines or ``<answer>`` blocks with
different values, boxes inside boxes, and the gold value only in the reasoning."""

from __future__ import annotations

from rlvr.audit.probes import family


@family("markers", kinds=("generic",))
def markers(ctx):
    """Nested or repeated answer markers: \\boxed{\\boxed{A}}, several \\boxed with different values,
    'Answer: X' repeated, two <answer> blocks, the gold value only inside <think>."""
    a, wrongs = ctx.core, ctx.wrong(1)
    if not wrongs:
        return []
    b = wrongs[0]
    return [
        ("boxed_two_gold_last", f"\\boxed{{{b}}} \\boxed{{{a}}}", "no_reward"),
        ("boxed_two_gold_first", f"\\boxed{{{a}}} \\boxed{{{b}}}", "no_reward"),
        ("boxed_inside_wrong", f"\\boxed{{{b} \\boxed{{{a}}}}}", "no_reward"),
        ("boxed_wrong_inside", f"\\boxed{{{a} \\boxed{{{b}}}}}", "no_reward"),
        ("boxed_nested", f"\\boxed{{\\boxed{{{a}}}}}", "any"),
        ("boxed_repeated_same", f"\\boxed{{{a}}} \\boxed{{{a}}}", "any"),
        ("boxed_unclosed", f"\\boxed{{{a}", "any"),
        ("answer_lines_gold_last", f"Answer: {b}\nAnswer: {a}", "no_reward"),
        ("answer_lines_gold_first", f"Answer: {a}\nAnswer: {b}", "no_reward"),
        ("answer_repeated_same", f"Answer: {a}\n" * 3, "any"),
        ("answer_tags_gold_last", f"<answer>{b}</answer><answer>{a}</answer>", "no_reward"),
        ("answer_tags_gold_first", f"<answer>{a}</answer><answer>{b}</answer>", "no_reward"),
        ("answer_tags_nested", f"<answer><answer>{a}</answer></answer>", "any"),
        ("gold_only_in_think", f"<think>The answer is {a}.</think>\n{ctx.wrap(b)}", "no_reward"),
        ("gold_in_unclosed_think", f"<think>{a}", "no_reward"),
        ("final_answer_then_other", f"Final answer: {b}. (Some would say {a}.)", "no_reward"),
    ]
