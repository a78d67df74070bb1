"""Approved training samples written straight into a store, as the signals job would leave them.

For the tests and the training benchmarks: a real turn (prompt rendered with the model's chat
template and tokenized by llama.cpp, as served) and its sample (kind, hint, reward).

Not run alone.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from clawd.chattemplate import ChatTemplate
from clawd.store import record
from clawd.store.db import Store

QUESTION = "What is the capital of France?"
LONG = (
    "The capital of France is Paris. It is known for the Eiffel Tower, the Louvre, and "
    "its many cafes along the Seine."
)


def tokenize(gguf: Path, text: str) -> list[int]:
    from llama_cpp import Llama

    llm = Llama(str(gguf), vocab_only=True, verbose=False)
    return llm.tokenize(text.encode(), add_bos=False, special=True)


def add_sample(
    store: Store,
    gguf: Path,
    *,
    answer: str = LONG,
    hint: str | None,
    reward: float,
    kind: str,
    question: str = QUESTION,
) -> int:
    messages = [{"role": "user", "content": f"{question}"}]
    prompt = tokenize(gguf, ChatTemplate.from_gguf(gguf).render(messages))
    response = tokenize(gguf, answer)
    ctx = record.begin(store, messages, f"c{time.time_ns()}", True)
    tid = record.record_turn(
        store,
        ctx,
        response_text=answer,
        model="m",
        prompt_token_ids=prompt,
        response_token_ids=response,
    )
    return (
        store.db["samples"]
        .insert(
            {
                "turn_id": tid,
                "kind": kind,
                "prompt_token_ids": json.dumps(prompt),
                "response_token_ids": json.dumps(response),
                "hint": hint,
                "reward": reward,
                "status": "approved",
                "created_at": time.time(),
            }
        )
        .last_pk
    )
