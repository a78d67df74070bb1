"""The model's greedy answers, batched, each cut after its end-of-turn token.

Two steps of a run ask the weights it starts from for their greedy answers: unlikelihood
(``clawd.training.repeats``: the answers to the user's own prompts that repeat a phrase) and
consolidation (``clawd.training.consolidate``: the memories' teacher answers). Both ask many
prompts at once, so ``greedy_answers`` writes them in left-padded batches (``generate`` derives
positions from the attention mask) and cuts each after its first end-of-turn token, which it
keeps. A batch may differ from the same prompt asked alone by float rounding, where two tokens
tie. The gate asks the same kind of answers in llama.cpp (``clawd.adapters.loops``), not here.

``shaped_answer`` writes one answer as the daemon serves it under the memories' shape
(``clawd.signals.shaping``): the opening and the closing question forced, the answer ended where
the shape ends it; it says which tokens decoding forced rather than the model chose. Its loop,
``shaped_decode``, takes the model as a next-token function, so that the gate's gap measurement
(``clawd.adapters.memgap``) writes the same answers in llama.cpp.

Run alone to print a model's (or an adapter's) greedy answers to the gate's general prompts and
which of them degenerate (empty or looping), on CPU::

    python -m clawd.training.greedy MODEL.gguf [PEFT_DIR]
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from clawd.chattemplate import THINK_CLOSE, THINK_OPEN
from clawd.signals.avoid import Avoider, TokenClasses
from clawd.signals.shaper import Shaper
from clawd.signals.shaping import Shape


def cut_at_end(answer: list[int], eos: list[int]) -> list[int]:
    """``answer`` up to and including its first end-of-turn token (all of it without one)."""
    ends = [i for i, t in enumerate(answer) if t in eos]
    return answer[: ends[0] + 1] if ends else answer


@torch.inference_mode()
def greedy_answers(
    model: Any, prompts: list[list[int]], max_tokens: int, eos: list[int], batch: int = 16
) -> list[list[int]]:
    """The model's greedy answers to ``prompts`` (token ids), at most ``max_tokens`` tokens each,
    cut after the first end-of-turn token (``eos``: its ids, not empty), in batches of
    ``batch``."""
    out: list[list[int]] = []
    device = next(model.parameters()).device
    for i in range(0, len(prompts), batch):
        chunk = prompts[i : i + batch]
        width = max(map(len, chunk))
        ids = torch.tensor([[eos[0]] * (width - len(r)) + r for r in chunk], device=device)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in chunk], device=device)
        got = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max_tokens,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=eos[0],
        )  # (B, width + at most max_tokens)
        out += [cut_at_end(row[width:].tolist()[:max_tokens], eos) for row in got]
    return out


def shaped_decode(
    next_token: Callable[[list[int], np.ndarray], int],
    prompt: list[int],
    shape: Shape,
    encode: Callable[[str], list[int]],
    piece_of: Callable[[int], str],
    max_tokens: int,
    is_end: Callable[[int], bool],
    end: int,
    classes: TokenClasses | None = None,
) -> tuple[list[int], list[float]]:
    """A greedy answer to ``prompt`` (token ids) under ``shape``, as the engine serves it
    (``clawd.serving.engine``), on any backend: ``next_token(ids, banned)`` appends ``ids`` to
    what the model has read and returns its most likely next token other than the ``banned``
    ids (what the shape avoids, ``clawd.signals.avoid``, with the vocabulary's ``classes``);
    ``encode`` and ``piece_of`` turn text into ids and one id into text; ``is_end`` says whether
    a token ends a turn, ``end`` is the one to end it with. The opening comes instead of the
    first token of content
    (after a thinking model's ``<think>`` block, which the shape leaves alone), a closing
    question ("Would you like") comes instead of an end without one, a sign-off before the end,
    and an answer the shape
    ends gets ``end``. Returns the answer's tokens (at most ``max_tokens``) and, for each,
    1.0 where decoding forced it (the opening, the closing words, the end the shape set) and
    0.0 where the model chose it."""
    shaper = Shaper(shape)
    out: list[int] = []
    forced: list[float] = []
    opening = shape.opening
    feed = list(prompt)
    thinking = ""  # a thinking model's <think>...</think> block: no shape applies inside it
    avoider = Avoider(classes, shape.avoid) if classes is not None else None
    nothing = np.array([], np.intp)

    def take(ids: list[int], mark: float = 0.0) -> None:
        out.extend(ids)
        forced.extend([mark] * len(ids))
        feed.extend(ids)

    def force(text: str) -> bool:
        ids = encode(text)
        if len(out) + len(ids) >= max_tokens:
            return False
        take(ids, 1.0)
        shaper.forced(text)
        return True

    while len(out) < max_tokens:
        asking = shaper.closing_started
        banned = avoider.banned(shaper.text, ids=out, asking=asking) if avoider else nothing
        if asking:  # a tokenizer's end may decode to text: the question ends with "?" first
            banned = np.append(banned, end)
        banned = nothing if thinking else banned
        token = next_token(feed, banned)
        feed.clear()
        if is_end(token):
            if shaper.closing() and force(shape.closing_words):
                continue  # the end comes after the question
            if shaper.signing():
                force(shape.signoff_words)  # the answer's last words
            take([token])
            break
        piece = piece_of(token)
        if thinking or (not out and piece.strip() == THINK_OPEN):
            thinking = "" if THINK_CLOSE in thinking + piece else thinking + piece
            take([token])
            continue
        if opening and piece.strip():
            fits, opening = force(opening), None
            if fits:
                continue  # the opening comes instead of the content's first token
        take([token])
        verdict = shaper.push(piece, max_tokens - len(out))
        if verdict == "end" and shaper.closing() and force(shape.closing_words):
            continue
        if verdict == "end" and shaper.question_open():
            force("?")  # a closing question out of room still asks
        if verdict in ("end", "cut") and shaper.signing():
            force(shape.signoff_words)
        if verdict == "end" and len(out) < max_tokens:
            take([end], 1.0)  # the shape said "stop here"
        if verdict in ("end", "cut"):
            break
    return out, forced


@torch.inference_mode()
def shaped_answer(
    model: Any,
    prompt: list[int],
    shape: Shape,
    tok: Any,
    max_tokens: int,
    eos: list[int],
) -> tuple[list[int], list[float]]:
    """``shaped_decode`` with a transformers ``model`` (its key-value cache kept between
    tokens) and its tokenizer ``tok``."""
    device = next(model.parameters()).device
    past: Any = None

    def next_token(ids: list[int], banned: np.ndarray) -> int:
        nonlocal past
        step = model(input_ids=torch.tensor([ids], device=device), cache=past, use_cache=True)
        past = step.cache
        logits = step.logits[0, -1].float()
        if len(banned):
            logits[torch.from_numpy(banned).to(device)] = -torch.inf
        return int(logits.argmax())

    return shaped_decode(
        next_token,
        prompt,
        shape,
        lambda text: tok(text, add_special_tokens=False)["input_ids"],
        lambda t: tok.decode([t]),
        max_tokens,
        lambda t: t in eos,
        eos[0],
        token_classes(tok) if shape.avoid or shape.closes else None,
    )


@functools.lru_cache(maxsize=2)
def token_classes(tok: Any) -> TokenClasses:
    """A transformers tokenizer's tokens classed for ``clawd.signals.avoid`` (a token that is
    part of a character decodes as U+FFFD, so what it begins is not seen: emoji that begin
    in one such token and end in another are not banned here, unlike in the engine)."""
    return TokenClasses(
        [tok.decode([i]).encode() for i in range(len(tok))],
        lambda text: tok(text, add_special_tokens=False)["input_ids"],
    )


def script_model(module: str) -> tuple[Any, Any, list[list[int]], list[int]]:
    """For a module run alone with ``MODEL.gguf [PEFT_DIR]``: the model in eval mode (with the
    adapter, when given), its tokenizer, the gate's general prompts as token ids and the
    end-of-turn ids; exits with a usage line on other arguments."""
    import sys
    from pathlib import Path

    from clawd.adapters.gate import general_prompts
    from clawd.chattemplate import ChatTemplate
    from clawd.config import clawd_home
    from clawd.training import torchmodel

    if len(sys.argv) not in (2, 3):
        sys.exit(f"usage: python -m {module} MODEL.gguf [PEFT_DIR]")
    gguf = Path(sys.argv[1])
    model, tok = torchmodel.load(gguf, clawd_home())
    if len(sys.argv) == 3:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, sys.argv[2])
    model.eval()
    render = ChatTemplate.from_gguf(gguf).render
    prompts = general_prompts(lambda s: tok(s, add_special_tokens=False)["input_ids"], render)
    return model, tok, prompts, torchmodel.end_tokens(tok)


def main() -> None:
    from clawd.adapters.gate import ABILITY_TOKENS
    from clawd.adapters.loops import degeneration

    model, tok, prompts, eos = script_model("clawd.training.greedy")
    answers = greedy_answers(model, prompts, ABILITY_TOKENS, eos)
    bad = set(degeneration(answers, lambda t: t in eos)["at"])
    for k, a in enumerate(answers):
        mark = "LOOP " if k in bad else ""
        print(f"{k:2d} {mark}{tok.decode(a)!r}")


if __name__ == "__main__":
    main()
