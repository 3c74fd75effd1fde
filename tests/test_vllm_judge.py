"""The judge verifier against a real OpenAI-compatible server: vLLM's CPU build serving a tiny deterministic
model (it repeats the last character of its input), asked through both APIs, in batches, cached; then the
server is stopped and the judge's failures are counted, never raised. Marked ``vllm``: run with
``bash scripts/test_vllm.sh`` (skipped where vLLM is absent)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("vllm")

from rlvr.core.types import Example  # noqa: E402
from rlvr.verifiers import build_verifier  # noqa: E402
from tests.judge_server import echo_judge_dir  # noqa: E402

pytestmark = pytest.mark.vllm

CHAT = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = echo_judge_dir(tmp_path_factory.mktemp("judge") / "echo", chat_template=CHAT)
    port = _free_port()
    log = tmp_path_factory.mktemp("judge-log") / "server.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1"}
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(path),
                                 "--served-model-name", "echo", "--host", "127.0.0.1", "--port", str(port),
                                 "--dtype", "float32", "--max-model-len", "512", "--max-num-seqs", "8"],
                                stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    while True:
        if proc.poll() is not None:
            pytest.fail(f"vllm serve exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(url + "/models", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"vllm serve did not come up in 300 s:\n{log.read_text()[-4000:]}")
        time.sleep(1)
    yield url, proc
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _judge(url, **kw):
    return build_verifier("judge", {"base_url": url, "model": "echo", "template": "{prompt} {completion}",
                                    "score_pattern": "(\\d)", "max_tokens": 3, "backoff_s": 0.05, **kw})


EXAMPLES = [Example(f"e{i}", f"task {i}:", "") for i in range(6)]
TEXTS = [f"my answer is {d}" for d in (3, 1, 4, 1, 5, 9)]
WANT = [d / 10 for d in (3, 1, 4, 1, 5, 9)]


@pytest.mark.parametrize("api,batch", [("chat", 16), ("completions", 4)])
def test_a_served_model_judges_every_completion_in_order(served, api, batch):
    url, _ = served
    v = _judge(url, api=api, batch_size=batch)
    scores = v.score_batch(EXAMPLES, TEXTS)
    assert [s.reward for s in scores] == WANT, [s.info for s in scores]
    assert scores[0].info["judge_reply"] == "333"
    assert v.stats["requests"] == (6 if api == "chat" else 2)  # one conversation, or 4 prompts, a request
    assert v.stats["tokens"] > 0 and not any(k.startswith("failures/") for k in v.stats)
    again = v.score_batch(EXAMPLES, TEXTS)
    assert [s.reward for s in again] == WANT and v.stats["cache_hits"] == 6


def test_a_stopped_server_is_counted_not_raised(served):
    url, proc = served
    proc.terminate()
    proc.wait(60)
    v = _judge(url, retries=1)
    scores = v.score_batch(EXAMPLES[:2], TEXTS[:2])
    assert all(s.reward == 0.0 and s.info["reason"].startswith("verifier error: judge:") for s in scores)
    assert v.stats["failures/connect"] == 4
