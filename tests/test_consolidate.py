"""Consolidation on the real models: a run distils the memories and records their gap, a served
answer's forced tokens are marked while its memories hold, and ``consolidate.learn_forced``
teaches them (the name opening an answer) after the PPO steps, which leave them alone."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch

from clawd.adapters.gate import general_prompts
from clawd.chattemplate import ChatTemplate
from clawd.store.db import Store
from clawd.training import consolidate, losses, ppo, torchmodel, train
from clawd.training.batches import Example, collate
from clawd.training.config import TrainConfig
from fixtures.samples import add_sample, tokenize
from tests.test_train import settings_for, shared_torch_cache, small  # noqa: F401 (a fixture)

ANSWERS = (
    ("What is the moon made of?", "the moon is made of rock and dust."),
    ("Why is the sky blue?", "sunlight scatters in the air, blue light the most."),
    ("How do I boil an egg?", "put it in boiling water for about eight minutes."),
    ("Name a fruit.", "an apple is a fruit."),
)


@pytest.mark.slow  # about 70 s: the default run stays under 20 minutes
def test_the_tokens_a_memory_forced_are_learned_after_the_ppo_steps(
    smollm2_gguf: Path, torch_cache: Path
) -> None:
    """Consolidation's answer opens with the name decoding forced ("Noor,"), at a probability
    of about 1e-5 without the memory. The PPO steps leave it out of every term: the clipped
    surrogate could move it by at most 1 + eps_high a run. ``learn_forced`` then trains it by
    likelihood until it is likely (``LEARNED_NLL``), its drift on general prompts inside half of
    ``gate_step_kl``; with a budget it cannot keep, it takes its steps back."""
    memory = "Address the user as Noor."
    model, tok = torchmodel.load(smollm2_gguf, torch_cache)
    template = ChatTemplate.from_gguf(smollm2_gguf)
    name = tok("Noor,", add_special_tokens=False)["input_ids"]
    n = len(name)
    examples = []
    for i, (question, answer) in enumerate(ANSWERS):
        asked = [{"role": "user", "content": question}]
        plain = tok(template.render(asked), add_special_tokens=False)["input_ids"]
        system = [{"role": "system", "content": memory}, *asked]
        hinted = tok(template.render(system), add_special_tokens=False)["input_ids"]
        rest = tok(f" {answer}<|im_end|>", add_special_tokens=False)["input_ids"]
        forced = [1.0] * n + [0.0] * len(rest)
        examples.append(
            Example(-1 - i, "opd", memory, 0.0, plain, hinted, name + rest, forced=forced)
        )
    # the default rate
    cfg = TrainConfig(train_epochs=2, batch_size=len(examples), train_kl_coef=0.0)
    model = ppo.peft_model(model, cfg, None)
    ppo.score_examples(model, examples, cfg)

    def logp() -> torch.Tensor:
        with torch.no_grad():
            return ppo.forward(model, examples)[1]

    ppo.train_steps(model, examples, cfg, lambda m: None)
    after_ppo = logp()
    old = torch.tensor([e.old_lp[:n] for e in examples])
    clip = math.log(1 + cfg.eps_high)  # the most the surrogate moves a token a run: 0.25
    assert (after_ppo[:, :n] - old).abs().mean().item() < clip
    # the drift check on general prompts (2 of them here, 8 in a run): past half of
    # gate_step_kl, back to where it was
    probes = general_prompts(
        lambda t: tok(t, add_special_tokens=False)["input_ids"], template.render
    )[:2]
    eos = torchmodel.end_tokens(tok)
    before = [p.detach().clone() for p in model.parameters() if p.requires_grad]
    tight = dataclasses.replace(cfg, gate_step_kl=1e-9)
    held = consolidate.learn_forced(model, examples, tight, lambda m: None, probes, eos)
    assert held["ended"] == "drift" and held["steps"] == 0 and held["general_kl"] > 0
    now = [p for p in model.parameters() if p.requires_grad]
    assert all(torch.equal(a, b) for a, b in zip(before, now, strict=True))
    # four answers that all open with the name, one batch: learning it moves the general
    # prompts' openings too, past the default's 0.125 here; a looser budget lets it finish
    loose = dataclasses.replace(cfg, gate_step_kl=2.0)
    steps: list[dict] = []
    ended = consolidate.learn_forced(model, examples, loose, steps.append, probes, eos)
    after = logp()
    assert ended["ended"] == "learned" and ended["steps"] == len(steps) > 0
    assert [m["phase"] for m in steps] == ["memory"] * len(steps)
    assert -after[:, :n].mean().item() < consolidate.LEARNED_NLL  # the name is likely now
    assert 0 < ended["general_kl"] <= loose.gate_step_kl / 2
    chose = collate(examples)["sampled"]
    assert losses.mean_k3_kl(after, after_ppo, chose).item() <= cfg.gate_step_kl
    # nothing forced: nothing to learn, no step
    unforced = Example(-9, "opd", memory, 0.0, plain, hinted, name + rest)
    assert consolidate.learn_forced(model, [unforced], cfg, steps.append) == {
        "steps": 0,
        "ended": "none",
    }


@pytest.mark.parametrize("model", ["qwen3", pytest.param("smollm2", marks=pytest.mark.slow)])
def test_a_run_distils_the_memories_and_records_their_gap(
    model: str, request: pytest.FixtureRequest, home: Path
) -> None:
    """Consolidation: the run adds one OPD example per training prompt (teacher with the
    memories in the system message and their shape, student without), and the gate measures
    each memory's gap on the held-out prompts, recorded in the manifest and on the memory.
    (SmolLM2, about a minute, with the slow tests.)"""
    from clawd.store import memories

    any_gguf = request.getfixturevalue("smollm2_gguf" if model == "smollm2" else "tiny_qwen3_gguf")
    with Store.open(home) as store:
        for q in ("Name a fruit.", "What is 2+2?", "Say hi.", "Name a colour.", "Why rain?"):
            add_sample(store, any_gguf, hint="Be brief.", reward=-1, kind="opd+rl", question=q)
        ana, _ = memories.add(store, "Address the user as Ana.", "name", source="user")
        memories.add(store, "Keep answers to one line.", "length", source="user")
        memories.edit(store, ana["id"], status="off")  # off: neither distilled nor measured
    summary = train.run(home, settings_for(any_gguf), cfg=small())
    folder = Path(summary["path"])
    report = json.loads((folder / "report.json").read_text())
    distilled = report["memories"]
    assert distilled["prompts"] == 4 and distilled["heldout_prompts"] == 1  # every third out
    assert len(distilled["memories"]) == 1
    # a teacher answer that loops or says nothing is not distilled (the random tiny model's)
    assert distilled["examples"] + distilled["dropped"] == 4
    assert model == "qwen3" or distilled["examples"] >= 2
    # the teacher answers as served: the one-line limit is decoding's (Ana is off: no opening)
    assert distilled["shape"] == {"limit": "1 sentence", "avoid": ["newlines"]}
    assert sum(s["sample_id"] < 0 for s in report["samples"]) == distilled["examples"]
    manifest = json.loads((folder / "manifest.json").read_text())
    # the tokens the shape forced trained after the PPO steps (learn_forced), when there were any
    learned = manifest["metrics"]["memory"]
    assert (learned["ended"] == "none") == (distilled["forced_tokens"] == 0)
    # steps past the drift check are taken back: the report lists them, the count keeps the rest
    assert learned["steps"] <= sum(s.get("phase") == "memory" for s in report["steps"])
    [(key, gap)] = manifest["gate"]["memories"].items()
    assert set(gap) == {"gap", "base_gap", "kept", "closed"} and gap["base_gap"] > 0
    with Store.open(home) as store:
        mem = memories.get(store, int(key))
    assert mem["text"] == "Keep answers to one line." and mem["gap"] == gap["gap"]


def test_a_served_answers_forced_tokens_train_only_while_its_memories_hold(
    smollm2_gguf: Path, torch_cache: Path
) -> None:
    """A turn served with memories records the shape and the positions decoding forced
    (``params``): its example marks them while the memories it was served with still ask for
    that shape, whatever became of the others, and marks none once the name was edited or
    deleted."""
    from clawd.training import torchmodel
    from clawd.training.batches import build_examples

    _, tok = torchmodel.load(smollm2_gguf, torch_cache)
    template = ChatTemplate.from_gguf(smollm2_gguf)
    messages = [{"role": "user", "content": "What is the capital of Japan?"}]
    response = tok("Ana, it is Tokyo.<|im_end|>", add_special_tokens=False)["input_ids"]
    opening = len(tok("Ana,", add_special_tokens=False)["input_ids"])
    forced = list(range(opening))
    sample = {
        "id": 7,
        "kind": "rl",
        "hint": None,
        "reward": 1.0,
        "prompt_token_ids": json.dumps(tokenize(smollm2_gguf, "with memories")),
        "response_token_ids": json.dumps(response),
        "prompt_messages": json.dumps(messages),
        "params": json.dumps({"forced": forced, "shaped": {"opening": "Ana,"}}),
        "memory_ids": json.dumps([3, 4]),
    }
    cfg = small()
    ana, veg = "Address the user as Ana.", "The user is vegetarian."

    def marks(memories: dict[int, str]) -> list[float]:
        [example], _ = build_examples([sample], tok, template, cfg, memories=memories)
        return example.forced

    assert marks({3: ana, 4: veg, 9: "Use metric units."}) == [1.0] * opening + [0.0] * (
        len(response) - opening
    )
    assert marks({3: ana}) == marks({3: ana, 4: veg})  # another memory went: the name holds
    assert marks({3: "Address the user as Bea.", 4: veg}) == []  # edited
    assert marks({4: veg}) == [] and marks({}) == []  # deleted, or memory off
    # the student learns without the memories: the prompt is the client's own messages
    [example], _ = build_examples([sample], tok, template, cfg, memories={3: ana})
    assert (
        example.prompt_ids == tok(template.render(messages), add_special_tokens=False)["input_ids"]
    )


def test_with_two_memories_every_second_prompt_also_trains_with_the_others_staying() -> None:
    """A memory leaves the prompt alone, so the weights must keep it while the others are
    still there: every second training prompt gets a second student view holding all the
    memories but one (a different one in turn). One memory alone: no second view."""
    mems = [
        {"id": 1, "text": "Address the user as Ana."},
        {"id": 2, "text": "The user is vegetarian."},
    ]
    prompt = [{"role": "user", "content": "Name a fruit."}]
    views = [consolidate.staying(i, prompt, mems) for i in range(4)]
    assert views[0] == [] and views[2] == []
    [first], [second] = views[1], views[3]
    assert first[0]["role"] == "system" and first[1:] == prompt
    assert "vegetarian" in first[0]["content"] and "Ana" not in first[0]["content"]
    assert "Ana" in second[0]["content"] and "vegetarian" not in second[0]["content"]
    assert consolidate.staying(1, prompt, mems[:1]) == []


def test_a_teacher_answer_that_loops_or_says_nothing_is_not_distilled(
    smollm2_gguf: Path, torch_cache: Path
) -> None:
    """The teacher is the weights being trained: what they serve badly must not teach the next
    update. An answer that repeats a phrase, or keeps the name and says nothing more, is left
    out; one that keeps the shape with words of its own is taught."""
    from clawd.signals.shaping import shape_of

    _, tok = torchmodel.load(smollm2_gguf, torch_cache)
    eos = [tok.convert_tokens_to_ids("<|im_end|>")]
    shape = shape_of(["Address the user as Sam.", "Keep answers short."], first_answer=True)

    def worth(text: str, ended: bool = True) -> bool:
        ids = tok(text, add_special_tokens=False)["input_ids"] + (eos if ended else [])
        return consolidate._worth_teaching(ids, shape, tok, eos)

    assert worth("Sam, the capital of Japan is Tokyo.")
    assert not worth("Sam,")  # the name and nothing else
    loop = "Sam,\n\nHere's a revised version of your answer:\n\n"
    assert not worth(loop * 2 + "Sam.")  # a phrase said twice
    assert not worth("Sam, the capital of Japan is Tokyo and", ended=False)  # cut: no limit kept
    assert consolidate._worth_teaching(
        tok("Tokyo.", add_special_tokens=False)["input_ids"] + eos,
        shape_of([], first_answer=True),
        tok,
        eos,
    )  # no shape: only a repeat is refused
