"""The judge: runs the judge and hint-extractor calls on a model that never carries an adapter.

By default the judge is a second llama.cpp instance over the served GGUF (the file is mmapped,
so the weights are shared): adapters are set per context, so this one stays the base model and
does not drift with the policy. Any other GGUF can be configured (``judge_model``). It holds the
model itself (no serving queue or worker thread): the signal job calls it from its own thread.

It must not make the user wait: before each small batch of prompt tokens and before each new
token it waits on ``yield_to``, an event the serving engine sets while no user request is
queued or running.

Each vote reasons freely for up to ``judge_max_tokens`` tokens. A vote that has not written a
valid ``\\boxed{}`` score by then abstains (its score is None; the raw text is kept and shows
why): forcing a score out of a model that did not reach one only records its label bias. When
the hint extractor has written ``\\boxed{1}`` it is asked for the hint after ``[HINT_START]``.
This is ``judge_mode = "generate"``; the default scorer for small models is the probe
(``clawd.signals.probe``), which does not need the model to write.

Run alone to judge one exchange (request, answer, reply) with the configured model::

    python -m clawd.signals.judge "Capital of France?" "The capital is Paris." "No, one word."
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from clawd.chattemplate import ChatTemplate, TemplateError
from clawd.signals.rules import Exchange, hint_messages, judge_messages, parse_boxed

PROMPT_BATCH = 8  # tokens evaluated between two checks for a waiting user


class JudgeError(Exception):
    """The judge model could not be loaded, or a prompt does not fit its context."""


class Judge:
    def __init__(
        self,
        model_path: Path,
        *,
        n_ctx: int = 4096,
        n_threads: int = 0,
        max_tokens: int = 96,
        yield_to: threading.Event | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or None
        self.max_tokens = max_tokens
        self.yield_to = yield_to
        self.llm: Any = None
        self.template: ChatTemplate | None = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the model and its chat template (once; later calls do nothing)."""
        from llama_cpp import Llama

        if self.llm is not None:
            return
        try:
            llm = Llama(
                str(self.model_path), n_ctx=self.n_ctx, n_threads=self.n_threads, verbose=False
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise JudgeError(f"cannot load {self.model_path}: {exc}") from exc
        try:
            self.template = ChatTemplate.from_llama(llm, self.model_path)
        except TemplateError as exc:
            llm.close()
            raise JudgeError(str(exc)) from exc
        self.llm = llm

    def close(self) -> None:
        if self.llm is not None:
            self.llm.close()
            self.llm = None

    def _wait_for_user(self) -> None:
        if self.yield_to is not None:
            self.yield_to.wait()

    def _tokenize(self, text: str) -> list[int]:
        # The template already holds the BOS token where the model wants one.
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def _complete(
        self,
        prompt: list[int],
        *,
        temperature: float,
        seed: int,
        max_tokens: int,
        stop: str | None = None,
    ) -> str:
        """Generate text, yielding to user requests between prompt batches and tokens."""
        import llama_cpp

        llm = self.llm
        room = self.n_ctx - len(prompt) - 1
        if room < 1:
            raise JudgeError(f"judge prompt of {len(prompt)} tokens does not fit n_ctx")
        max_tokens = min(max_tokens, room)
        # Evaluate the prompt in small batches (all but the last token, which generate() does).
        cached = llm.longest_token_prefix(llm._input_ids[: llm.n_tokens].tolist(), prompt)
        if cached < len(prompt) - 1:
            if cached == 0:
                llm.reset()
            else:
                llm._ctx.kv_cache_seq_rm(-1, cached, -1)
                llm.n_tokens = cached
            for i in range(cached, len(prompt) - 1, PROMPT_BATCH):
                self._wait_for_user()
                llm.eval(prompt[i : min(i + PROMPT_BATCH, len(prompt) - 1)])
        llm.set_seed(seed)
        vocab = llm._model.vocab
        out: list[int] = []
        text = ""
        self._wait_for_user()
        for token in llm.generate(
            prompt,
            temp=temperature,
            top_k=0,
            top_p=1.0,
            min_p=0.0,
            repeat_penalty=1.0,
            reset=True,
        ):
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                break
            out.append(token)
            text = llm.detokenize(out).decode("utf-8", errors="ignore")
            if stop and stop in text:
                text = text[: text.index(stop) + len(stop)]
                break
            if len(out) >= max_tokens:
                break
            self._wait_for_user()
        return text

    def _render(self, messages: list[dict[str, str]]) -> str:
        if self.template is None:
            raise JudgeError("the judge is not loaded")
        try:
            return self.template.render(messages)
        except TemplateError as exc:
            raise JudgeError(str(exc)) from exc

    def _scored(self, head: str, temperature: float, seed: int) -> str:
        """Free reasoning, stopped after the first closing brace (the end of ``\\boxed{...}``)."""
        return self._complete(
            self._tokenize(head),
            temperature=temperature,
            seed=seed,
            max_tokens=self.max_tokens,
            stop="}",
        )

    def vote(self, ex: Exchange, *, temperature: float, seed: int) -> str:
        """One evaluative vote's raw text; ``parse_boxed`` reads its score (None: abstains)."""
        with self._lock:
            return self._scored(self._render(judge_messages(ex)), temperature, seed)

    def hint(self, ex: Exchange, *, temperature: float, seed: int) -> str:
        """One hint-extractor output: ``\\boxed{1}`` plus a hint, ``\\boxed{-1}``, or no score."""
        with self._lock:
            head = self._render(hint_messages(ex))
            text = self._scored(head, temperature, seed)
            if parse_boxed(text, allowed=(1, -1)) != 1:
                return text
            text += "\n[HINT_START]"
            return text + self._complete(
                self._tokenize(head + text),
                temperature=temperature,
                seed=seed,
                max_tokens=self.max_tokens,
                stop="[HINT_END]",
            )


if __name__ == "__main__":
    from clawd.config import load_settings
    from clawd.models import resolve

    settings = load_settings()
    judge = Judge(resolve(settings.judge_model or settings.model))
    judge.load()
    ex = Exchange(request=sys.argv[1], answer=sys.argv[2], reply=sys.argv[3])
    for i in range(settings.judge_votes):
        raw = judge.vote(ex, temperature=settings.judge_temperature, seed=i)
        print(f"--- vote {i} -> {parse_boxed(raw)}\n{raw}")
    print(f"--- hint\n{judge.hint(ex, temperature=settings.judge_temperature, seed=0)}")
    judge.close()
