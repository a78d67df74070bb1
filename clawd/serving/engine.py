"""The engine: one llama.cpp model, its chat template, and a fair one-at-a-time request queue.

llama.cpp contexts are not thread-safe, so every generation runs on a single worker thread that
takes requests in arrival order (first come, first served); control jobs such as an adapter
switch go ahead of waiting requests, right after the one in flight. A job streams ``Delta``
events back through a callback and can be cancelled between two tokens (a client that hangs
up). The KV
cache is reused when a prompt extends the previous one; how much was reused is reported as
``cached_tokens``. Every result names the adapter that produced it (``None``: the base model).
A ``Shape`` (``clawd.signals.shaping``) may open the answer with given words, end it at a
length limit, or force a closing question: the forced words are fed to the model as if it had
written them and are part of the answer's tokens.

Run alone to answer one question on the default model::

    python -m clawd.serving.engine "What is the capital of France?"
"""

from __future__ import annotations

import itertools
import queue
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawd.chattemplate import THINK_OPEN, ChatTemplate, TemplateError
from clawd.serving.textstream import Answer, Delta
from clawd.signals.avoid import Avoider, llama_classes
from clawd.signals.shaping import Shape


class EngineError(Exception):
    """The model could not be loaded or a prompt could not be rendered."""


class PromptTooLong(EngineError):
    def __init__(self, prompt_tokens: int, n_ctx: int) -> None:
        super().__init__(
            f"the prompt is {prompt_tokens} tokens but the context window is {n_ctx} tokens; "
            "shorten the conversation or raise n_ctx"
        )
        self.prompt_tokens, self.n_ctx = prompt_tokens, n_ctx


@dataclass
class GenParams:
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    shape: Shape | None = None
    grammar: str | None = None  # GBNF the answer must match (clawd.serving.structured)


@dataclass
class Result:
    prompt_token_ids: list[int]
    response_token_ids: list[int]  # as generated, the end-of-generation token included
    content: str
    reasoning: str
    finish_reason: str  # "stop", "length" or "cancelled"
    cached_tokens: int
    adapter_version: str | None
    total_ms: float
    # time.perf_counter() when the worker took the job, sampled the first token and released
    # the first content (0.0: never), for the request's timeline (``clawd.timings_ms``)
    started_at: float = 0.0
    first_token_at: float = 0.0
    first_content_at: float = 0.0
    # positions in response_token_ids that decoding forced for the memories' shape (the
    # opening, the closing words, the end a limit set), which training learns by likelihood
    forced: list[int] = field(default_factory=list)

    @property
    def ttft_ms(self) -> float:
        """The engine's own time to the first token (the whole time when none came)."""
        if not self.first_token_at:
            return self.total_ms
        return (self.first_token_at - self.started_at) * 1000


@dataclass
class _Job:
    prompt: list[int]
    params: GenParams
    on_delta: Callable[[Delta], None]
    cancel: threading.Event
    done: Callable[[Any], None]
    control: Callable[[], Any] | None = None  # runs between two requests instead of generating


class Engine:
    """Holds one llama.cpp model; ``submit`` queues a generation, ``render`` builds prompts."""

    def __init__(self, model_path: Path, *, n_ctx: int = 4096, n_threads: int = 0) -> None:
        self.model_path = Path(model_path)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or None
        self.adapter_version: str | None = None
        self.llm: Any = None
        self.thinks = False  # set by load: whether the model has a <think> token
        # (priority, arrival, job): control jobs (adapter switches) go before waiting requests,
        # requests among themselves first come, first served.
        self._jobs: queue.PriorityQueue[tuple[int, int, _Job | None]] = queue.PriorityQueue()
        self._arrivals = itertools.count()
        self._worker: threading.Thread | None = None
        # Set while no user request is queued or running: background work (the judge) waits
        # on it between tokens, so the user never waits behind it.
        self._pending = 0
        self._pending_lock = threading.Lock()
        self.idle = threading.Event()
        self.idle.set()
        self.last_request_at = 0.0  # time.time() of the last user request

    # -- loading ---------------------------------------------------------------------------
    def load(self) -> None:
        from llama_cpp import Llama

        if self.llm is not None:
            raise EngineError("the engine is already loaded")

        try:
            self.llm = Llama(
                str(self.model_path), n_ctx=self.n_ctx, n_threads=self.n_threads, verbose=False
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise EngineError(f"cannot load {self.model_path}: {exc}") from exc
        try:
            self.template = ChatTemplate.from_llama(self.llm, self.model_path)
        except TemplateError as exc:
            raise EngineError(str(exc)) from exc
        self.architecture = self.llm.metadata.get("general.architecture", "unknown")
        # A model thinks in <think>...</think> only if the tag is a token of its own; for
        # any other the text pipeline holds nothing back for it.
        self.thinks = len(self.tokenize(THINK_OPEN)) == 1
        self._worker = threading.Thread(target=self._run, name="clawd-engine", daemon=True)
        self._worker.start()

    def close(self) -> None:
        if self._worker:
            self._jobs.put((0, next(self._arrivals), None))
            self._worker.join(timeout=30)
            self._worker = None
        if self.llm is not None:
            self.llm.close()
            self.llm = None

    # -- prompts ---------------------------------------------------------------------------
    def render(self, messages: list[dict[str, Any]], **template_kwargs: Any) -> str:
        """The chat template applied to ``messages``, ending with the generation prompt."""
        try:
            return self.template.render(messages, **template_kwargs)
        except TemplateError as exc:
            raise EngineError(str(exc)) from exc

    def tokenize(self, text: str) -> list[int]:
        # The template already holds the BOS token where the model wants one.
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def check_fits(self, prompt: list[int], max_tokens: int | None) -> int:
        """The number of tokens the answer may have; raises PromptTooLong."""
        room = self.n_ctx - len(prompt)
        if room < 1:
            raise PromptTooLong(len(prompt), self.n_ctx)
        return min(room, max_tokens) if max_tokens else room

    # -- generation ------------------------------------------------------------------------
    def submit(
        self,
        prompt: list[int],
        params: GenParams,
        on_delta: Callable[[Delta], None],
        cancel: threading.Event,
        done: Callable[[Result | BaseException], None],
    ) -> None:
        """Queue a generation; ``done`` receives the Result (or the exception) on the worker."""
        if self._worker is None:
            raise EngineError("the engine is not loaded")
        self.last_request_at = time.time()
        with self._pending_lock:
            self._pending += 1
            self.idle.clear()
        self._jobs.put((1, next(self._arrivals), _Job(prompt, params, on_delta, cancel, done)))

    def between_requests(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the worker as soon as the request in flight (if any) is done; wait."""
        if self._worker is None:
            raise EngineError("the engine is not loaded")
        box: queue.Queue[Any] = queue.Queue()
        job = _Job([], GenParams(), lambda d: None, threading.Event(), box.put, fn)
        self._jobs.put((0, next(self._arrivals), job))
        result = box.get()
        if isinstance(result, BaseException):
            raise result
        return result

    @property
    def queued(self) -> int:
        return self._jobs.qsize()

    def _run(self) -> None:
        while (job := self._jobs.get()[2]) is not None:
            try:
                if job.control is not None:
                    job.done(job.control())
                elif job.cancel.is_set():
                    job.done(self._empty(job, "cancelled"))
                else:
                    job.done(self._generate(job))
            except BaseException as exc:  # handed to the waiting request, never kills the worker
                job.done(exc)
            finally:
                if job.control is None:
                    with self._pending_lock:
                        self._pending -= 1
                        if self._pending == 0:
                            self.idle.set()

    def _empty(self, job: _Job, reason: str) -> Result:
        return Result(job.prompt, [], "", "", reason, 0, self.adapter_version, 0.0)

    def _generate(self, job: _Job) -> Result:
        import llama_cpp

        llm, params = self.llm, job.params
        budget = self.check_fits(job.prompt, params.max_tokens)
        cached = llm.longest_token_prefix(llm._input_ids[: llm.n_tokens].tolist(), job.prompt)
        llm.set_seed(params.seed if params.seed is not None else random.getrandbits(31))
        answer = Answer(llm, params.stop, params.shape, job.on_delta, self.thinks, budget)
        shaper, out_ids = answer.shaper, answer.out_ids
        opening = params.shape.opening if params.shape else None
        closing = params.shape.closing_words if params.shape else ""
        finish, t0 = "length", time.perf_counter()
        vocab = llm._model.vocab
        grammar = None
        if params.grammar:
            from llama_cpp import LlamaGrammar

            grammar = LlamaGrammar.from_string(params.grammar, verbose=False)
        avoid = None
        if params.shape and (params.shape.avoid or params.shape.closes):
            avoider = Avoider(llama_classes(llm), params.shape.avoid)
            avoid = [avoider.processor(answer.avoid_state)]
        restart = True
        while restart and len(out_ids) < budget:
            restart = False
            # llama.cpp keeps the KV cache of the common prefix: a restart after forced words
            # evaluates only them
            for token in llm.generate(
                job.prompt + out_ids,
                temp=params.temperature,
                top_p=params.top_p,
                top_k=0,
                min_p=0.0,
                repeat_penalty=1.0,
                reset=True,
                grammar=grammar,
                logits_processor=avoid,
            ):
                answer.first.setdefault("token", time.perf_counter())
                if job.cancel.is_set():
                    finish = "cancelled"
                    break
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    if shaper is not None and shaper.closing() and answer.force(closing):
                        restart = True  # the end-of-generation token is not served
                        break
                    if shaper is not None and shaper.signing():
                        answer.force(params.shape.signoff_words)  # the answer's last words
                    finish = "stop"
                    out_ids.append(token)  # "stop here" is part of what was served and learned
                    break
                piece = llm.detokenize([token], special=False)
                if opening and answer.starts_content(piece):
                    restart, opening = answer.force(opening), None
                    if restart:
                        break  # the opening comes instead of the content's first token
                out_ids.append(token)
                verdict = answer.push(piece, left=budget - len(out_ids))
                if answer.stops.stopped:
                    finish = "stop"
                    break
                if verdict == "end" and shaper and shaper.closing() and answer.force(closing):
                    restart = True
                    break
                if verdict == "end" and shaper and shaper.question_open():
                    answer.force("?")  # a closing question out of room still asks
                if verdict in ("end", "cut"):
                    if shaper and shaper.signing():
                        answer.force(params.shape.signoff_words)
                    finish = "stop" if verdict == "end" else "length"
                    if verdict == "end" and len(out_ids) < budget:
                        answer.forced.append(len(out_ids))
                        out_ids.append(llm.token_eos())  # the shape said "stop here"
                    break
                if len(out_ids) >= budget:
                    break
        answer.flush()
        total = (time.perf_counter() - t0) * 1000
        return Result(
            job.prompt,
            out_ids,
            "".join(answer.content),
            "".join(answer.reasoning),
            finish,
            cached,
            self.adapter_version,
            total,
            t0,
            answer.first.get("token", 0.0),
            answer.first.get("content", 0.0),
            answer.forced,
        )


def generate_blocking(engine: Engine, prompt: list[int], params: GenParams) -> Result:
    """Run one generation and wait for it (for scripts, benchmarks and tests)."""
    box: queue.Queue[Result | BaseException] = queue.Queue()
    engine.submit(prompt, params, lambda d: None, threading.Event(), box.put)
    result = box.get()
    if isinstance(result, BaseException):
        raise result
    return result


if __name__ == "__main__":
    from clawd.config import load_settings
    from clawd.models import resolve

    settings = load_settings()
    engine = Engine(resolve(settings.model), n_ctx=settings.n_ctx, n_threads=settings.n_threads)
    engine.load()
    question = sys.argv[1] if len(sys.argv) > 1 else "Hello!"
    prompt = engine.tokenize(engine.render([{"role": "user", "content": question}]))
    print(generate_blocking(engine, prompt, GenParams(temperature=0, max_tokens=128)).content)
    engine.close()
