"""The judge: runs the judge and hint-extractor calls on a model that never carries an adapter.

By default the judge is a second llama.cpp instance over the served GGUF (the file is mmapped,
so the weights are shared): adapters are set per context, so this one stays the base model and
does not drift with the policy. Any other GGUF can be configured (``judge_model``). It holds the
model itself (no serving queue or worker thread): the signal job calls it from its own thread.

It must not make the user wait: before each small batch of prompt tokens and before each new
token it waits on ``yield_to``, an event the serving engine sets while no user request is
queued or running.

Each vote reasons freely for up to ``judge_max_tokens`` tokens; when it has not written a
score by then, ``\\boxed{`` is appended and a grammar restricts the next tokens to a valid score,
so that a small model's votes are valid more often (the raw text shows exactly what was
forced). The hint extractor is forced the same way into ``[HINT_START]`` after ``\\boxed{1}``.

Run alone to judge one exchange with the default model::

    python -m clawd.signals.judge "The capital is Paris." "No, answer in one word."
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from clawd.chattemplate import ChatTemplate, TemplateError
from clawd.signals.rules import hint_messages, judge_messages, parse_boxed

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
        self._grammars: dict[str, Any] = {}

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

    def _grammar(self, gbnf: str) -> Any:
        from llama_cpp import LlamaGrammar

        if gbnf not in self._grammars:
            self._grammars[gbnf] = LlamaGrammar.from_string(gbnf, verbose=False)
        return self._grammars[gbnf]

    def _complete(
        self,
        prompt: list[int],
        *,
        temperature: float,
        seed: int,
        max_tokens: int,
        stop: str | None = None,
        grammar: str | None = None,
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
            grammar=self._grammar(grammar) if grammar else None,
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

    def _scored(self, head: str, allowed: tuple[int, ...], temperature: float, seed: int) -> str:
        """Free reasoning that ends in ``\\boxed{score}``, the score forced if need be."""
        text = self._complete(
            self._tokenize(head),
            temperature=temperature,
            seed=seed,
            max_tokens=self.max_tokens,
            stop="}",
        )
        if parse_boxed(text, allowed=allowed) is not None:
            return text
        forced = text.split("\\boxed", 1)[0].rstrip() + "\n\\boxed{"
        choices = " | ".join(f'"{v}"' for v in allowed)
        return forced + self._complete(
            self._tokenize(head + forced),
            temperature=temperature,
            seed=seed,
            max_tokens=4,
            grammar=f'root ::= ({choices}) "}}"',
        )

    def vote(
        self, response: str, role: str, next_state: str, *, temperature: float, seed: int
    ) -> str:
        """One evaluative vote: the raw text, ending in a score."""
        with self._lock:
            head = self._render(judge_messages(response, role, next_state))
            return self._scored(head, (1, -1, 0), temperature, seed)

    def hint(
        self, response: str, role: str, next_state: str, *, temperature: float, seed: int
    ) -> str:
        """One hint-extractor output: ``\\boxed{1}`` plus a hint, or ``\\boxed{-1}``."""
        with self._lock:
            head = self._render(hint_messages(response, role, next_state))
            text = self._scored(head, (1, -1), temperature, seed)
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
    answer, reply = sys.argv[1], sys.argv[2]
    for i in range(settings.judge_votes):
        print(f"--- vote {i}\n{judge.vote(answer, 'user', reply, temperature=0.6, seed=i)}")
    print(f"--- hint\n{judge.hint(answer, 'user', reply, temperature=0.6, seed=0)}")
    judge.close()
