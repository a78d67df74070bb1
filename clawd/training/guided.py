"""Guided greedy decoding: the hinted model's answer with the hint's effect amplified.

A small model told a preference in its context shifts its next-token distribution toward it but
rarely far enough for a greedy answer to show it (SmolLM2-135M told "Address the user by their
name, Sam." writes the name in none of 8 greedy answers). Classifier-free guidance (Ho and
Salimans, 2022; Sanchez et al., 2023, for language models) scores each next token by

    s_t(v) = log p(v | hinted, a_<t) + (g - 1) * (log p(v | hinted, a_<t) - log p(v | plain, a_<t))

where ``hinted`` is the prompt with the hint, ``plain`` the same prompt without it, and ``g``
the guidance scale (1: the hinted model's own greedy answer). The answer ``a`` is decoded
greedily on ``s``, both contexts advancing with the same chosen token, each with its own KV
cache: ``transformers``' ``generate(guidance_scale=g, negative_prompt_ids=plain)``
(``UnbatchedClassifierFreeGuidanceLogitsProcessor``), checked against the formula recomputed
from both whole contexts in ``tests/test_guided.py``.

Run alone to print an answer with and without guidance on the default model::

    python -m clawd.training.guided "How do I boil an egg?" "Address the user by their name, Sam."
"""

from __future__ import annotations

from typing import Any

import torch


@torch.inference_mode()
def guided_greedy(
    model: Any,
    hinted: list[int],
    plain: list[int],
    scale: float,
    max_tokens: int,
    eos: list[int],
) -> list[int]:
    """The greedy answer on guided scores ``s`` (module docstring), cut after its end-of-turn
    token; ``hinted`` and ``plain`` are prompt token ids, ``eos`` the end-of-turn ids."""
    device = next(model.parameters()).device
    ids = torch.tensor([hinted], device=device)
    negative = torch.tensor([plain], device=device)
    row = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        negative_prompt_ids=negative,
        negative_prompt_attention_mask=torch.ones_like(negative),
        guidance_scale=scale,
        max_new_tokens=max_tokens,
        do_sample=False,
        eos_token_id=eos or None,
        pad_token_id=eos[0] if eos else 0,
    )[0, ids.shape[1] :].tolist()
    return cut_at_end(row, eos)


def cut_at_end(answer: list[int], eos: list[int]) -> list[int]:
    """``answer`` up to and including its first end-of-turn token (all of it without one)."""
    ends = [i for i, t in enumerate(answer) if t in eos]
    return answer[: ends[0] + 1] if ends else answer


def main() -> None:
    import sys

    from clawd.chattemplate import ChatTemplate, teacher_messages
    from clawd.config import clawd_home
    from clawd.models import resolve
    from clawd.training import torchmodel

    question, hint = sys.argv[1], sys.argv[2]
    gguf = resolve("smollm2-135m", clawd_home())
    model, tok = torchmodel.load(gguf, clawd_home() / "cache")
    template = ChatTemplate.from_gguf(gguf)
    msgs = [{"role": "user", "content": question}]

    def ids(text: str) -> list[int]:
        return tok(text, add_special_tokens=False)["input_ids"]

    eos = [tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id]
    hinted, plain = ids(template.render(teacher_messages(msgs, hint))), ids(template.render(msgs))
    for scale in (1.0, 1.5, 2.0):
        answer = guided_greedy(model, hinted, plain, scale, 96, eos)
        print(f"g={scale}: {tok.decode(answer, skip_special_tokens=True)!r}")


if __name__ == "__main__":
    main()
