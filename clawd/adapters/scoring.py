"""A llama.cpp context that scores token sequences, with an adapter switched on it in place.

The gate (``clawd.adapters.gate``) reads next-token distributions and greedy answers through it,
the memories' gap (``clawd.adapters.memgap``) the answers a memory's shape serves. Run alone to
print a model's greedy next token after a text::

    python -m clawd.adapters.scoring MODEL.gguf "The capital of France is"
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np


class Scorer:
    """One llama.cpp context with all logits kept; adapters switched on it in place."""

    def __init__(self, model_path: Path, n_ctx: int = 2048, threads: int = 0) -> None:
        from llama_cpp import Llama

        self.llm = Llama(
            str(model_path),
            n_ctx=n_ctx,
            n_threads=threads or os.cpu_count() or 1,
            logits_all=True,
            verbose=False,
        )
        self._adapter: Any = None

    def set_adapter(self, path: Path | None) -> None:
        import llama_cpp

        ctx = self.llm._ctx.ctx
        new = None
        if path is not None:
            new = llama_cpp.llama_adapter_lora_init(self.llm.model, str(path).encode())
            if not new:
                raise ValueError(f"llama.cpp could not load {path}")
            arr = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(new)
            llama_cpp.llama_set_adapters_lora(ctx, arr, 1, (ctypes.c_float * 1)(1.0))
        else:
            llama_cpp.llama_set_adapters_lora(ctx, None, 0, None)
        if self._adapter is not None:
            llama_cpp.llama_adapter_lora_free(self._adapter)
        self._adapter = new
        self.restart()

    def log_softmax(self, tokens: list[int], start: int = 0) -> np.ndarray:
        """(len(tokens) - start, V) next-token log-probabilities after each prefix from
        ``tokens[: start + 1]`` on."""
        self.restart()
        self.llm.eval(tokens)
        x = np.array(self.llm.scores[start : len(tokens)], dtype=np.float64)
        x -= x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    def answer(
        self, prompt: list[int], max_tokens: int, temperature: float = 0.0, seed: int = 0
    ) -> list[int]:
        """The answer to ``prompt``, its end-of-generation token included if reached: greedy, or
        with ``temperature`` > 0 sampled as the daemon samples (top-p 1, no top-k or min-p)
        from the random seed ``seed``."""
        import llama_cpp

        vocab = self.llm._model.vocab
        out: list[int] = []
        self.restart()
        self.llm.set_seed(seed)
        top_k = 1 if temperature == 0 else 0
        for token in self.llm.generate(
            prompt, top_k=top_k, top_p=1.0, min_p=0.0, temp=temperature, repeat_penalty=1.0
        ):
            out.append(token)
            if llama_cpp.llama_vocab_is_eog(vocab, token) or len(out) >= max_tokens:
                break
        return out

    def next_token(self, tokens: list[int], banned: np.ndarray | None = None) -> int:
        """Reads ``tokens`` after what the context holds (``restart`` empties it) and returns
        the greedy next token, other than the ``banned`` ids."""
        self.llm.eval(tokens)
        scores = self.llm.scores[self.llm.n_tokens - 1]
        if banned is not None and len(banned):
            scores = scores.copy()
            scores[banned] = -np.inf
        return int(np.argmax(scores))

    def restart(self) -> None:
        self.llm.reset()
        self.llm._ctx.kv_cache_clear()

    def encode(self, text: str) -> list[int]:
        return self.llm.tokenize(text.encode(), add_bos=False, special=False)

    def piece(self, token: int) -> str:
        return self.llm.detokenize([token]).decode("utf-8", "replace")

    def is_end(self, token: int) -> bool:
        import llama_cpp

        return bool(llama_cpp.llama_vocab_is_eog(self.llm._model.vocab, token))

    def response_logprobs(self, prompt: list[int], response: list[int]) -> np.ndarray:
        lp = self.log_softmax(prompt + response, len(prompt) - 1)
        return lp[np.arange(len(response)), response]

    def close(self) -> None:
        self.set_adapter(None)
        self.llm.close()


if __name__ == "__main__":
    scorer = Scorer(Path(sys.argv[1]))
    token = scorer.next_token(scorer.encode(sys.argv[2]))
    print(repr(scorer.piece(token)))
    scorer.close()
