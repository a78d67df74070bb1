"""The update's pieces that need a real model: how much an answer belongs to its question
(``ppo.relevance``), which decides whether a hindsight answer trains."""

from __future__ import annotations

from pathlib import Path

from adapters.gate import general_prompts
from clawd.chattemplate import ChatTemplate
from clawd.training import ppo, torchmodel
from clawd.training.config import TrainConfig


def test_relevance_tells_an_answer_from_one_that_fits_any_question(
    smollm2_gguf: Path, torch_cache: Path
) -> None:
    model, tok = torchmodel.load(smollm2_gguf, torch_cache)
    template = ChatTemplate.from_gguf(smollm2_gguf)

    def tokens(text: str) -> list[int]:
        return tok(text, add_special_tokens=False)["input_ids"]

    references = general_prompts(tokens, template.render)[::8]
    end = tokens("<|im_end|>")

    def rel(question: str, answer: str) -> float:
        prompt = tokens(template.render([{"role": "user", "content": question}]))
        return ppo.relevance(model, prompt, tokens(answer) + end, references)

    q = "What is the capital of Australia?"
    specific = rel(q, "The capital of Australia is Canberra.")
    short = rel(q, "Canberra.")
    named = rel(q, "Sam, the capital of Australia is Canberra.")
    generic = rel(q, "I'm here to assist you. What can I help you with today?")
    advice = rel("How do I make friends in a new city?", "Join a club and go every week.")
    deflect = rel("How do I make friends in a new city?", "I'm here to help. What's on your mind?")
    floor = TrainConfig().hindsight_min_relevance
    # Answers to the question, short or with a name, clear the floor; answers to any question
    # do not, and fall under a quarter of the specific answer's relevance.
    assert min(specific, short, named) > 1.0 and advice > floor
    assert generic < floor and deflect < floor
    assert generic < 0.25 * specific and deflect < advice
    assert ppo.relevance(model, [1, 2], [], references) == 0.0
