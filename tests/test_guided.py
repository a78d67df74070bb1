"""Guided greedy decoding (``clawd.training.guided``) on the real SmolLM2: the cached decode
matches the formula recomputed without a cache, scale 1 is the model's own greedy answer, and
the guided answer is one more hindsight candidate in the trainer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from adapters.gate import general_prompts
from clawd.chattemplate import ChatTemplate, teacher_messages
from clawd.training import hindsight, torchmodel
from clawd.training.batches import Example
from clawd.training.config import TrainConfig
from clawd.training.guided import guided_greedy

HINT = "Address the user by their name, Sam. Answer in at most 60 words."


@pytest.fixture(scope="module")
def smol(smollm2_gguf: Path, torch_cache: Path) -> dict[str, Any]:
    model, tok = torchmodel.load(smollm2_gguf, torch_cache)
    template = ChatTemplate.from_gguf(smollm2_gguf)

    def tokens(text: str) -> list[int]:
        return tok(text, add_special_tokens=False)["input_ids"]

    def prompts(question: str) -> tuple[list[int], list[int]]:
        msgs = [{"role": "user", "content": question}]
        return tokens(template.render(teacher_messages(msgs, HINT))), tokens(template.render(msgs))

    eos = [tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id]
    references = general_prompts(tokens, template.render)[::8]  # as the trainer measures
    return {"model": model, "tok": tok, "prompts": prompts, "eos": eos, "refs": references}


def _uncached(model: Any, hinted: list[int], plain: list[int], scale: float, n: int) -> list[int]:
    """The formula, recomputed from both whole contexts at every step."""
    answer: list[int] = []
    with torch.inference_mode():
        for _ in range(n):
            h = torch.log_softmax(model(torch.tensor([hinted + answer])).logits[0, -1], -1)
            p = torch.log_softmax(model(torch.tensor([plain + answer])).logits[0, -1], -1)
            answer.append(int((h + (scale - 1) * (h - p)).argmax()))
    return answer


def test_the_guided_answer_is_the_formula_and_scale_one_is_plain_greedy(
    smol: dict[str, Any],
) -> None:
    model, eos = smol["model"], smol["eos"]
    hinted, plain = smol["prompts"]("Recommend a book for a long flight.")
    guided = guided_greedy(model, hinted, plain, 1.5, 12, eos)
    assert guided == _uncached(model, hinted, plain, 1.5, 12)
    ids = torch.tensor([hinted])
    greedy = model.generate(
        input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False,
        eos_token_id=eos, pad_token_id=eos[0],
    )[0, ids.shape[1] :].tolist()  # fmt: skip
    assert guided_greedy(model, hinted, plain, 1.0, 12, eos) == greedy
    assert guided != greedy


def test_guidance_brings_out_a_preference_the_greedy_answer_does_not_show(
    smol: dict[str, Any],
) -> None:
    """Measured on SmolLM2-135M (docs/experiments.md): told to use the name Sam, its greedy
    answer to this question does not; at scale 1.5 the guided answer opens with it."""
    model, tok, eos = smol["model"], smol["tok"], smol["eos"]
    hinted, plain = smol["prompts"]("Recommend a book for a long flight.")
    plain_answer = tok.decode(guided_greedy(model, hinted, plain, 1.0, 48, eos))
    guided_answer = tok.decode(guided_greedy(model, hinted, plain, 1.5, 48, eos))
    assert "Sam" not in plain_answer
    assert guided_answer.startswith("Sam,"), guided_answer


def test_the_trainer_adds_the_guided_answer_as_a_candidate_and_says_which_trained(
    smol: dict[str, Any],
) -> None:
    model, tok, eos = smol["model"], smol["tok"], smol["eos"]
    hinted, plain = smol["prompts"]("Recommend a book for a long flight.")
    served = tok("Try a novel.<|im_end|>", add_special_tokens=False)["input_ids"]
    reports = {}
    for scale in (1.0, 1.5):
        ex = Example(1, "opd+rl", HINT, -1.0, plain, hinted, served)
        cfg = TrainConfig(hindsight=True, hindsight_guidance=scale, hindsight_max_tokens=48)
        _, (seen,) = hindsight.hindsight_examples(model, [ex], cfg, eos, smol["refs"])
        reports[scale] = seen
    assert reports[1.0]["candidates"] == 1 and reports[1.0]["guided"] is False
    assert reports[1.5]["candidates"] == 2
    # the guided answer ("Sam, welcome to ...") answers the question and explains the hint best
    assert reports[1.5]["guided"] is True and reports[1.5]["kept"] is True, reports
    with pytest.raises(ValueError, match="hindsight_guidance"):
        TrainConfig(hindsight_guidance=0.5)
