"""Repeated phrases and the unlikelihood term on the real model: the base SmolLM2 loops on
some general prompts, and a few steps of the term make it loop less."""

from __future__ import annotations

from pathlib import Path

import torch

from clawd.adapters.gate import ABILITY_TOKENS, general_prompts
from clawd.chattemplate import ChatTemplate
from clawd.training import ppo, torchmodel
from clawd.training.batches import Example, collate
from clawd.training.config import TrainConfig
from clawd.training.repeats import collate_repeats, own_repeats, repeated_ngrams


def test_a_token_is_marked_from_the_second_copy_of_its_phrase_on() -> None:
    assert repeated_ngrams([1, 2, 3, 4, 1, 2, 3, 4, 1]) == [False] * 7 + [True, True]
    assert repeated_ngrams([5, 5, 5, 5, 5], n=2) == [False, False, True, True, True]
    assert not any(repeated_ngrams([1, 2, 3, 1, 2, 4, 1, 2, 3]))  # 3-token echoes only
    assert repeated_ngrams([]) == [] and repeated_ngrams([7, 7], n=4) == [False, False]


def test_collated_training_answers_mark_their_repeats() -> None:
    rows = [[1, 2, 3, 4, 1, 2, 3, 4], [9, 8]]
    batch = collate([Example(k, "rl", None, 1.0, [0], [0], r) for k, r in enumerate(rows)])
    assert batch["repeated"].tolist() == [[0.0] * 7 + [1.0], [0.0] * 8]


def _marked_logprob(model: object, found: list) -> float:
    rb = collate_repeats(found, "cpu")
    with torch.no_grad():
        lp = torchmodel.token_logprobs(
            model, rb["ids"], rb["attn"], rb["start"], rb["marked"].shape[1]
        )
    return float((lp * rb["marked"]).sum() / rb["marked"].sum())


def test_unlikelihood_steps_make_the_models_own_loop_less_likely(
    smollm2_gguf: Path, torch_cache: Path
) -> None:
    """The base model's greedy answer to "How do I boil an egg?" says "Boil an egg:" over and
    over. Six steps on an unrelated served answer with the term on lower the log-prob of the
    loop's repeating tokens and shorten the loop; the steps report the term. A single sample's
    reward centres to 0 and the KL penalty is off, so the term is the only gradient here."""
    model, tok = torchmodel.load(smollm2_gguf, torch_cache)
    render = ChatTemplate.from_gguf(smollm2_gguf).render

    def tokens(text: str) -> list[int]:
        return tok(text, add_special_tokens=False)["input_ids"]

    egg = general_prompts(tokens, render)[18]
    eos = torchmodel.end_tokens(tok)
    cfg = TrainConfig(
        train_lr=1e-3,
        train_epochs=6,
        batch_size=1,
        train_target_kl=0.0,
        train_kl_coef=0.0,
        train_unlikelihood=1.0,
    )
    model = ppo.peft_model(model, cfg, None)
    found, written = own_repeats(model, [egg], ABILITY_TOKENS, eos)
    assert written == 1 and len(found) == 1 and sum(found[0].marked) > 20  # a loop
    before = _marked_logprob(model, found)
    served = tokens("Put it in boiling water for eight minutes.<|im_end|>")
    example = Example(
        1, "rl", None, 1.0, tokens(render([{"role": "user", "content": "Egg?"}])), [], served
    )
    example.teacher_prompt_ids = example.prompt_ids
    ppo.score_examples(model, [example], cfg)
    steps: list[dict] = []
    ppo.train_steps(model, [example], cfg, steps.append, repeats=found)
    assert len(steps) == 6 and all(s["unlikelihood"] > 0 for s in steps)
    after = _marked_logprob(model, found)
    again, _ = own_repeats(model, [egg], ABILITY_TOKENS, eos)
    # Measured: -0.21 nats per repeating token before, -12.8 after, and no 4-gram repeats left.
    assert after < before - 1.0
    assert sum(r.marked.count(True) for r in again) < sum(found[0].marked) / 2
