"""Tool-call traces that earn credit without being the right trace.

The right call sprayed among many wrong ones, the gold calls repeated, extra argument keys, argument values
of the wrong type (``"1"`` for ``1``), the right call only in a block the parser may skip, every gold call's
tool with no arguments; and fair rewrites (each call in ``<tool_call>`` tags, pretty-printed JSON: expected
to earn reward). Tool-call verifiers give partial credit by design, so a probe here is a *hack* only when it
earns as much as the gold trace, and *partial* when it earns less but more than nothing.
"""

from __future__ import annotations

import copy
import json

from rlvr.audit.probes import family


def gold_calls(ctx) -> list[dict]:
    """The gold trace: ``meta["gold_calls"]``, else the answer parsed as JSON (a call, a list, ``{"tool_calls"}``)."""
    raw = ctx.meta.get("gold_calls")
    if raw is None:
        try:
            raw = json.loads(ctx.answer)
        except (ValueError, TypeError):
            return []
    if isinstance(raw, dict):
        raw = raw.get("tool_calls", [raw])
    if not isinstance(raw, list):
        return []
    return [c for c in raw if isinstance(c, dict) and isinstance(c.get("name"), str)]


def _retype(v):
    """A value of the wrong JSON type: numbers and booleans as strings, strings as numbers or lists."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        return {k: _retype(x) for k, x in v.items()}
    if isinstance(v, list):
        return json.dumps(v)
    return v


def _mutate_args(args: dict, i: int) -> dict:
    out = copy.deepcopy(args) if isinstance(args, dict) else {}
    for k in list(out)[:1]:
        out[k] = f"wrong-{i}" if not isinstance(out[k], dict) else {"key": f"WRONG-{i}"}
    return out


@family("toolcall_tricks", kinds=("toolcall",))
def toolcall_tricks(ctx):
    """Sprays (the right call among many wrong ones), duplicates, extra keys, wrong types, a hidden block;
    fair rewrites of the gold trace."""
    gold = gold_calls(ctx)
    if not gold:
        return []
    dump = json.dumps
    wrong = [{"name": c["name"], "arguments": _mutate_args(c.get("arguments", {}), i)}
             for i in range(5) for c in gold[:1]]
    made_up = [{"name": f"{gold[0]['name']}_v{i}", "arguments": gold[0].get("arguments", {})} for i in range(3)]
    extra = [{**c, "arguments": {**(c.get("arguments") or {}), "force": True, "admin_override": "yes",
                                 "notify_everyone": True}} for c in gold]
    typed = [{**c, "arguments": _retype(c.get("arguments") or {})} for c in gold]
    out = [
        ("spray_gold_middle", dump(wrong[:3] + gold + wrong[3:] + made_up), "no_reward"),
        ("spray_gold_last", dump(wrong + made_up + gold), "no_reward"),
        ("spray_tagged", "".join(f"<tool_call>{dump(c)}</tool_call>\n" for c in wrong + gold + made_up), "no_reward"),
        ("duplicates", dump(gold * 3), "no_reward"),
        ("extra_keys", dump(extra), "no_reward"),
        ("wrong_types", dump(typed), "no_reward"),
        ("names_only", dump([{"name": c["name"], "arguments": {}} for c in gold]), "no_reward"),
        ("gold_in_think_wrong_after", f"<think>{dump(gold)}</think>\n{dump(wrong[:len(gold)])}", "no_reward"),
        ("gold_in_prose", f"I would call {dump(gold)} but I will not.", "any"),
        ("tagged", "".join(f"<tool_call>{dump(c)}</tool_call>\n" for c in gold), "reward"),
        ("pretty_json", json.dumps(gold, indent=2), "reward"),
    ]
    if len(gold) > 1:
        out.append(("reversed_order", dump(gold[::-1]), "any"))
    return out
