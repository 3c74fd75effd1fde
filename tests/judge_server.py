"""A fake OpenAI-compatible server for the judge's tests: ``/v1/chat/completions`` and ``/v1/completions``,
each reply computed from the request by ``grade`` (default: "Score: D" for the last digit of the request), with
scripted faults: a queue of actions taken one per request (``ok``, ``500``, ``429``, ``400``, ``malformed``,
``drop`` (close without a reply), ``slow:S``), then ``ok``. It records every request body."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


def last_digit_grade(text: str) -> str:
    digits = re.findall(r"\d", text)
    return f"I read it carefully. Score: {digits[-1] if digits else 'none'}"


class FakeJudgeServer:
    def __init__(self, grade: Callable[[str], str] = last_digit_grade, shuffle: bool = False):
        self.grade, self.shuffle = grade, shuffle
        self.actions: list[str] = []
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n))
                with server.lock:
                    server.bodies.append(body)
                    server.headers.append(dict(self.headers))
                    action = server.actions.pop(0) if server.actions else "ok"
                if action.startswith("slow:"):
                    time.sleep(float(action[5:]))
                    action = "ok"
                if action == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if action in ("500", "429", "400", "503"):
                    payload = b'{"error": "scripted"}'
                    self.send_response(int(action))
                    if action == "429":
                        self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if action == "malformed":
                    payload = b'{"choices": [ {"mess'
                elif self.path.endswith("/chat/completions"):
                    text = body["messages"][-1]["content"]
                    payload = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant",
                                                                                  "content": server.grade(text)}}],
                                          "usage": {"total_tokens": 10}}).encode()
                else:
                    choices = [{"index": i, "text": server.grade(p)} for i, p in enumerate(body["prompt"])]
                    if server.shuffle:
                        choices = choices[::-1]
                    payload = json.dumps({"choices": choices, "usage": {"total_tokens": 7 * len(choices)}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def echo_judge_dir(path, chat_template: str | None = None):
    """A tiny causal LM that repeats the last character of its input for ever (greedy): one-hot embeddings tied
    to the head and every block's output projections zeroed, so each position's logits are its own token's.
    A deterministic judge: with ``score_pattern: '(\\d)'`` a request ending in a digit is scored that digit.
    Heads of 32 (vLLM's CPU attention needs at least that)."""
    import torch

    from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer

    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=128, intermediate_size=64, num_layers=1, num_heads=4,
                                             num_kv_heads=1, max_positions=1024), tok, seed=0)
    with torch.no_grad():
        emb = model.get_input_embeddings().weight
        emb.zero_()
        emb[torch.arange(emb.shape[0]), torch.arange(emb.shape[0])] = 1.0
        for name, p in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                p.zero_()
    if chat_template is not None:
        tok.chat_template = chat_template
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
