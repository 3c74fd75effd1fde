"""Where a judge's replies come from: an OpenAI-compatible HTTP endpoint, or a Hugging Face model in this
process.

A backend answers ``complete(prompts, timeout_s) -> [Reply]``, one request for the list (the HTTP chat API takes
one prompt per request; the completions API and the in-process model take a batch), or raises
:class:`RequestFailed` saying whether trying again may help. Retries, deadlines, the cache and the budget are the
verifier's (:mod:`rlvr.verifiers.judge.verifier`), the same for every backend.

HTTP goes through the standard library (``urllib``): no client library to install, one connection per request,
the socket timeout bounded by what is left of the verifier's deadline. The API key, when the endpoint needs one,
is read from the environment variable ``api_key_env`` names (never from a config file, which a run copies).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import urllib.error
import urllib.request
from typing import Any, NamedTuple, Sequence

__all__ = ["Reply", "RequestFailed", "HTTPBackend", "HFBackend"]


class Reply(NamedTuple):
    text: str
    tokens: int  # prompt and reply tokens this reply cost (the server's usage when it reports one)


class RequestFailed(Exception):
    """One request failed; ``kind`` names how (``connect``, ``timeout``, ``http_429``, ``http_500``,
    ``malformed``, ...), ``retry`` whether trying again may help, ``after`` a wait the server asked for."""

    def __init__(self, kind: str, message: str, retry: bool, after: float | None = None):
        super().__init__(message)
        self.kind, self.retry, self.after = kind, retry, after


_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class HTTPBackend:
    """An OpenAI-compatible server: ``api: chat`` posts ``{base_url}/chat/completions`` (one conversation per
    request), ``api: completions`` posts ``{base_url}/completions`` with a list of prompts."""

    def __init__(self, base_url: str, model: str, api: str = "chat", system: str | None = None,
                 max_tokens: int = 256, temperature: float = 0.0, api_key_env: str = "OPENAI_API_KEY",
                 extra_body: dict[str, Any] | None = None):
        self.base_url, self.model, self.api, self.system = base_url.rstrip("/"), model, api, system
        self.max_tokens, self.temperature = max_tokens, temperature
        self.api_key_env, self.extra_body = api_key_env, dict(extra_body or {})
        self.per_request = 1 if api == "chat" else None
        self.key = f"http|{self.base_url}|{model}|{api}|{system}|{max_tokens}|{temperature}|" \
                   f"{json.dumps(self.extra_body, sort_keys=True)}"

    def _body(self, prompts: Sequence[str]) -> tuple[str, dict[str, Any]]:
        common = {"model": self.model, "max_tokens": self.max_tokens, "temperature": self.temperature,
                  **self.extra_body}
        if self.api == "chat":
            msgs = ([{"role": "system", "content": self.system}] if self.system else []) + \
                [{"role": "user", "content": prompts[0]}]
            return "/chat/completions", {**common, "messages": msgs}
        return "/completions", {**common, "prompt": list(prompts)}

    def complete(self, prompts: Sequence[str], timeout_s: float) -> list[Reply]:
        path, body = self._body(prompts)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(self.base_url + path, data=json.dumps(body).encode(), headers=headers,
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=max(timeout_s, 0.05)) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            detail = _body_text(e)
            after = _retry_after(e.headers.get("Retry-After") if e.headers else None)
            raise RequestFailed(f"http_{e.code}", f"HTTP {e.code} from {self.base_url}{path}: {detail}",
                                e.code in _RETRY_STATUS, after) from None
        except (socket.timeout, TimeoutError) as e:
            raise RequestFailed("timeout", f"no reply from {self.base_url}{path} within {timeout_s:.1f} s",
                                True) from e
        except urllib.error.URLError as e:
            kind = "timeout" if isinstance(e.reason, (socket.timeout, TimeoutError)) else "connect"
            raise RequestFailed(kind, f"cannot reach {self.base_url}{path}: {e.reason}", True) from None
        except (ConnectionError, OSError) as e:  # reset or closed mid-reply (http.client raises these bare)
            raise RequestFailed("connect", f"{self.base_url}{path}: {type(e).__name__}: {e}", True) from None
        return self._replies(raw, len(prompts), path)

    def _replies(self, raw: bytes, n: int, path: str) -> list[Reply]:
        try:
            data = json.loads(raw)
            choices = data["choices"]
            usage = data.get("usage") or {}
            total = int(usage.get("total_tokens") or 0)
            if self.api == "chat":
                texts = [choices[0]["message"]["content"]]
            else:
                by_index = {int(c.get("index", i)): c["text"] for i, c in enumerate(choices)}
                texts = [by_index[i] for i in range(n)]
            if not all(isinstance(t, str) for t in texts):
                raise TypeError("a reply's text is not a string")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            snippet = raw[:200].decode("utf-8", "replace")
            raise RequestFailed("malformed", f"malformed reply from {self.base_url}{path} ({type(e).__name__}: "
                                f"{e}): {snippet!r}", True) from None
        if not total:  # no usage reported: about four characters a token
            total = sum(len(t) for t in texts) // 4 + 1
        share = total // n
        return [Reply(t, share + (1 if i < total - share * n else 0)) for i, t in enumerate(texts)]


def _body_text(e: urllib.error.HTTPError) -> str:
    try:
        return e.read()[:300].decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 (the status is the message; the body is a courtesy)
        return ""


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


_LOADED: dict[tuple[str, str], tuple[Any, Any, threading.Lock]] = {}
_LOAD_LOCK = threading.Lock()


def _load_causal(path: str, device: str) -> tuple[Any, Any, threading.Lock]:
    with _LOAD_LOCK:
        if (path, device) not in _LOADED:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tok = AutoTokenizer.from_pretrained(path)
            tok.padding_side = "left"
            if tok.pad_token is None:
                tok.pad_token = tok.eos_token
            model = AutoModelForCausalLM.from_pretrained(path).to(device).eval()
            _LOADED[(path, device)] = (model, tok, threading.Lock())
        return _LOADED[(path, device)]


class HFBackend:
    """A local causal-LM directory in this process: the prompt in the tokenizer's chat template when it has one
    (a system turn when ``system`` is set, then a user turn), batched ``generate`` (greedy at temperature 0),
    one batch at a time per model. A batch already running is not interrupted at the deadline; the next one is
    not started."""

    def __init__(self, path: str, device: str = "auto", system: str | None = None, max_tokens: int = 256,
                 temperature: float = 0.0, seed: int = 0):
        import torch

        self.path = path
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        self.system, self.max_tokens, self.temperature, self.seed = system, max_tokens, temperature, seed
        self.per_request = None
        self.key = f"hf|{path}|{system}|{max_tokens}|{temperature}|{seed}"

    def _text(self, tok: Any, prompt: str) -> str:
        if getattr(tok, "chat_template", None):
            msgs = ([{"role": "system", "content": self.system}] if self.system else []) + \
                [{"role": "user", "content": prompt}]
            return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        return f"{self.system}\n\n{prompt}" if self.system else prompt

    def complete(self, prompts: Sequence[str], timeout_s: float) -> list[Reply]:
        import torch

        try:
            model, tok, lock = _load_causal(self.path, self.device)
        except Exception as e:  # a missing or damaged directory: no retry helps
            raise RequestFailed("load", f"cannot load the judge model {self.path}: {type(e).__name__}: {e}",
                                False) from None
        texts = [self._text(tok, p) for p in prompts]
        with lock:
            enc = tok(texts, return_tensors="pt", padding=True,
                      add_special_tokens=not getattr(tok, "chat_template", None)).to(model.device)
            kw: dict[str, Any] = {"max_new_tokens": self.max_tokens, "pad_token_id": tok.pad_token_id}
            if self.temperature > 0:
                kw.update(do_sample=True, temperature=self.temperature, top_k=0)
            else:
                kw.update(do_sample=False)
            devices = [model.device.index or 0] if model.device.type == "cuda" else []
            with torch.no_grad(), torch.random.fork_rng(devices=devices):  # the trainer's RNG streams untouched
                torch.manual_seed(self.seed)
                out = model.generate(**enc, **kw)
        width = enc["input_ids"].shape[1]
        replies = []
        for i in range(len(texts)):
            new = out[i, width:]
            n_new = int((new != tok.pad_token_id).sum()) if tok.pad_token_id is not None else int(new.numel())
            replies.append(Reply(tok.decode(new, skip_special_tokens=True),
                                 int(enc["attention_mask"][i].sum()) + n_new))
        return replies
