"""Vision-language model families: how each encodes image prompts."""
