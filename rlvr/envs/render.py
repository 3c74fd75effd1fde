"""Observation tokens: how an environment's text enters an episode's token sequence.

Only observations are ever encoded here, once each; the policy's tokens are never decoded and encoded
again (the driver keeps them as the engine sampled them). Two renderings:

- **plain** (prompts that are text): ``template.format(observation=...)``, default
  ``"\\n<obs>{observation}</obs>\\n"``, encoded without special tokens.
- **chat** (prompts rendered through the tokenizer's chat template): the observation becomes a message
  (role ``user`` by default, or ``tool``) and the tokens inserted are what the template writes after an
  assistant turn: the end of that turn (unless the policy already sampled its end token), the observation
  message and the next generation prompt. The template is rendered on a two-message stub and on the stub
  plus the observation, and the difference is taken as text, so any template that renders incrementally
  works; one that does not (rewrites earlier turns) is refused with a message.
"""

from __future__ import annotations

__all__ = ["ObservationRenderer", "PLAIN_TEMPLATE"]

PLAIN_TEMPLATE = "\n<obs>{observation}</obs>\n"
_STUB = [{"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}]


class ObservationRenderer:
    """Token ids of an observation that follows a policy turn."""

    def __init__(self, tokenizer, template: str = PLAIN_TEMPLATE, role: str = "user"):
        self.tokenizer, self.template, self.role = tokenizer, template, role

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def plain(self, observation: str) -> list[int]:
        return self.encode(self.template.format(observation=observation))

    def chat(self, observation: str, last_token: int | None) -> list[int]:
        """The template's tokens between the policy's turn (ending in ``last_token``) and its next turn."""
        tok = self.tokenizer
        if not getattr(tok, "chat_template", None):
            raise ValueError("chat observations need a tokenizer with a chat template")
        base = tok.apply_chat_template(_STUB, tokenize=False)
        full = tok.apply_chat_template(_STUB + [{"role": self.role, "content": observation}], tokenize=False,
                                       add_generation_prompt=True)
        if not full.startswith(base):
            raise ValueError("the chat template does not render turns incrementally (it rewrites earlier "
                             "turns); multi-turn rollouts need one that does, or plain observations")
        tail = base[base.rindex("A") + 1:]  # the end of an assistant turn, e.g. "<|im_end|>\n"
        if last_token is not None:
            end = tok.decode([last_token])
            if end and tail.startswith(end):
                tail = tail[len(end):]  # the policy closed its turn itself
        return self.encode(tail + full[len(base):])
