"""The engine on the real models: what it serves and stores, and when the text of a token
reaches the client (``clawd/serving/engine.py``)."""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import llama_cpp
import pytest

from clawd.serving.engine import Delta, Engine, GenParams, Result, generate_blocking

HI = [{"role": "user", "content": "Hi! Tell me a story about a cat."}]
HELLO = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def engine(any_gguf: Path):
    e = Engine(any_gguf, n_ctx=512, n_threads=1)
    e.load()
    yield e
    e.close()


def released(engine: Engine, params: GenParams) -> tuple[list[tuple[Delta, int]], Result]:
    """Each content delta with the number of tokens the model had been fed when it was
    released, and the result."""
    prompt = engine.tokenize(engine.render(HI))
    deltas: list[tuple[Delta, int]] = []
    box: queue.Queue = queue.Queue()

    def on_delta(d: Delta) -> None:  # runs on the engine's worker, between two tokens
        deltas.append((d, engine.llm.n_tokens - len(prompt)))

    engine.submit(prompt, params, on_delta, threading.Event(), box.put)
    result = box.get()
    assert isinstance(result, Result), result
    return [(d, fed) for d, fed in deltas if d.content], result


def test_the_first_token_is_sent_before_the_next_is_computed(engine: Engine) -> None:
    """With no stop string asked for, and a model that has no thinking tag, nothing holds
    text back: the first token's text leaves before the model is fed it (llama.cpp samples a
    token, hands it over, then evaluates it)."""
    assert not engine.thinks  # SmolLM2's vocabulary (the tiny Qwen3 shares it) has no <think>
    deltas, result = released(engine, GenParams(temperature=0, max_tokens=24))
    assert deltas, result
    # the first token that completes a character (a byte of one is rightly held)
    k = next(i for i in range(len(result.response_token_ids)) if _text(engine, result, i + 1))
    assert deltas[0][1] == k, deltas[:3]
    assert deltas[0][0].content == _text(engine, result, k + 1)


def _text(engine: Engine, result: Result, n: int) -> str:
    raw = engine.llm.detokenize(result.response_token_ids[:n])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return ""


def test_a_stop_string_holds_back_only_what_may_begin_it(engine: Engine) -> None:
    """A stop string whose first character the answer never starts with holds nothing; the
    stop string itself is never sent."""
    free, _ = released(engine, GenParams(temperature=0, max_tokens=24, stop=["\x07never"]))
    assert free[0][1] == 0
    prompt = engine.tokenize(engine.render(HI))
    whole = generate_blocking(engine, prompt, GenParams(temperature=0, max_tokens=24))
    cut = whole.content[len(whole.content) // 2 :][:3]
    if cut.strip():
        stopped, result = released(engine, GenParams(temperature=0, max_tokens=24, stop=[cut]))
        assert cut not in "".join(d.content for d, _ in stopped)
        assert result.finish_reason == "stop"


def test_the_end_of_turn_token_is_part_of_the_served_tokens(smollm2_gguf: Path) -> None:
    """'Stop here' is something a brevity preference must learn: the stored response ends with
    the end-of-turn token the model produced, and the text does not show it."""
    engine = Engine(smollm2_gguf, n_ctx=512, n_threads=1)
    engine.load()
    try:
        prompt = engine.tokenize(engine.render(HELLO))
        result = generate_blocking(engine, prompt, GenParams(temperature=0, max_tokens=96))
        vocab = engine.llm._model.vocab
        ends = [bool(llama_cpp.llama_vocab_is_eog(vocab, t)) for t in result.response_token_ids]
    finally:
        engine.close()
    assert result.finish_reason == "stop"
    assert ends[-1] and not any(ends[:-1])  # the end-of-turn token closes the served tokens
    assert "<|im_end|>" not in result.content and result.content.strip()
