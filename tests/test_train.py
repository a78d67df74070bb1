"""Real training runs on the fixture models: what changes, what is written, what is refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from clawd.chattemplate import ChatTemplate
from clawd.cli.main import app
from clawd.config import Settings
from clawd.signals.rules import LEARNABLE_KINDS
from clawd.signals.waiting import why_no_run
from clawd.store.db import Store
from clawd.threads import openmp_env, openmp_wait
from clawd.training import ppo, train
from fixtures.samples import LONG, QUESTION, add_sample, tokenize
from tests.test_export import llama_logprobs


def settings_for(gguf: Path) -> Settings:
    return Settings(model=str(gguf), n_ctx=1024)


@pytest.fixture(autouse=True)
def shared_torch_cache(home: Path, torch_cache: Path) -> None:
    """Convert each GGUF to torch once per session, not once per test."""
    home.mkdir(parents=True, exist_ok=True)
    (torch_cache / "cache").mkdir(exist_ok=True)
    (home / "cache").symlink_to(torch_cache / "cache")


def small(**kw: object) -> train.TrainConfig:
    return train.TrainConfig(
        **{
            "train_epochs": 2,
            "batch_size": 2,
            "train_lr": 1e-3,
            "n_ctx": 1024,
            "gate_max_kl": 100.0,
            "gate_step_kl": 100.0,
            # random-weight models answer noise, and noise loops or not by chance
            "gate_ability_alpha": 0.0,
            "train_target_kl": 0.0,
            "gate_prompts": 4,  # the gate's own tests (test_adapters) use all 32
            **kw,
        }
    )


def test_a_run_writes_a_candidate_and_marks_samples_used(any_gguf: Path, home: Path) -> None:
    with Store.open(home) as store:
        ids = [
            add_sample(store, any_gguf, hint="Answer in one word only.", reward=-1, kind="opd+rl"),
            add_sample(store, any_gguf, hint=None, reward=1, kind="rl", answer="Paris."),
            add_sample(store, any_gguf, hint="Be brief.", reward=0, kind="opd"),
        ]
    seen: list[int] = []
    summary = train.run(
        home,
        settings_for(any_gguf),
        cfg=small(),
        progress=lambda step, total, m: seen.append(step),
    )
    assert summary["steps"] == 4 and seen == [1, 2, 3, 4]
    folder = Path(summary["path"])
    for name in (
        "adapter.gguf",
        "peft/adapter_model.safetensors",
        "manifest.json",
        "report.json",
        "report.png",
    ):
        assert (folder / name).exists(), name
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "candidate" and sorted(manifest["samples"]) == sorted(ids)
    # the ability check also asked the user's own prompts: here the 3 samples share one
    assert "own_prompts_ability" in manifest["gate"]["checks"]
    assert manifest["gate"]["own_ability"]["candidate"]["answers"] == 1
    # where the run's time went, phase by phase, the gate's included
    phases = ["load", "score", "repeats", "train", "export", "gate"]
    assert list(manifest["seconds"]) == phases
    # no trust region in these tests (target_kl 0): every step taken is kept
    assert manifest["metrics"]["steps"] == 4 and manifest["metrics"]["undone"] == 0
    assert all(s >= 0 for s in manifest["seconds"].values()) and manifest["seconds"]["gate"] > 0
    report = json.loads((folder / "report.json").read_text())
    assert report["seconds"] == {k: v for k, v in manifest["seconds"].items() if k != "gate"}
    assert {"loss", "adv_mean", "adv_opd", "adv_rl", "clip_fraction", "kl", "tokens"} <= set(
        report["steps"][0]
    )
    hinted = next(s for s in report["samples"] if s["hint"])
    assert len(hinted["tokens"]) == len(hinted["opd_advantage"]) > 5
    with Store.open(home) as store:
        run = store.db["training_runs"].get(summary["run_id"])
        assert run["status"] == "succeeded" and run["adapter_version"] == summary["version"]
        assert store.db["training_steps"].count == 4
        assert {r["status"] for r in store.db["samples"].rows} == {"used"}
        assert store.db["adapters"].get(summary["version"])["status"] == "candidate"
        made = [e["message"] for e in store.db["events"].rows_where("kind = 'train'")][-1]
        assert f"made adapter {summary['version']} (load " in made and " s, gate " in made
    shown = CliRunner().invoke(app, ["adapters", "show", summary["version"]])
    assert shown.exit_code == 0 and "time: load " in shown.output, shown.output
    assert "training: 4 steps kept" in shown.output
    with pytest.raises(train.NothingToTrain):  # the samples are used up
        train.run(home, settings_for(any_gguf), cfg=small())


def test_lora_weights_change_and_base_weights_do_not(
    any_gguf: Path, torch_cache: Path, home: Path
) -> None:
    from clawd.training import torchmodel
    from clawd.training.batches import build_examples

    base, tok = torchmodel.load(any_gguf, torch_cache)
    cfg = small(rank=16, alpha=32)
    model = ppo.peft_model(base, cfg, None)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with Store.open(home) as store:
        add_sample(store, any_gguf, hint="Answer in one word only.", reward=-1, kind="opd+rl")
        rows = list(
            store.db.query(
                "SELECT x.*, t.prompt_messages, t.params FROM samples x "
                "JOIN turns t ON t.id = x.turn_id"
            )
        )
    examples, _ = build_examples(rows, tok, ChatTemplate.from_gguf(any_gguf), cfg)
    ppo.score_examples(model, examples, cfg)
    ppo.train_steps(model, examples, cfg, lambda m: None)
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    lora = {n for n in before if "lora_" in n}
    assert changed and changed <= lora  # only adapter weights moved
    assert any("lora_B" in n for n in changed)  # B starts at zero: the adapter now acts


@pytest.mark.slow  # 40-55 s: the default run stays near 20 minutes
def test_exported_adapter_loads_in_llama_cpp_and_agrees_with_torch(
    any_gguf: Path, home: Path
) -> None:
    from peft import PeftModel

    from clawd.training import torchmodel

    with Store.open(home) as store:
        for _ in range(2):
            add_sample(store, any_gguf, hint="Answer in one word only.", reward=-1, kind="opd+rl")
    summary = train.run(home, settings_for(any_gguf), cfg=small(train_epochs=4, train_lr=3e-3))
    folder = Path(summary["path"])
    base, tok = torchmodel.load(any_gguf, home)
    peft = PeftModel.from_pretrained(base, folder / "peft")
    ids = tok(f"{QUESTION} {LONG}")["input_ids"]

    def torch_lp(with_adapter: bool) -> np.ndarray:
        with torch.no_grad():
            if with_adapter:
                logits = peft(torch.tensor([ids])).logits[0]
            else:
                with peft.disable_adapter():
                    logits = peft(torch.tensor([ids])).logits[0]
        lp = torch.log_softmax(logits.float(), -1)
        return lp[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].numpy()

    torch_delta = torch_lp(True) - torch_lp(False)
    llama_delta = llama_logprobs(any_gguf, ids, folder / "adapter.gguf") - llama_logprobs(
        any_gguf, ids, None
    )
    assert np.abs(torch_delta).mean() > 0.05
    assert np.corrcoef(torch_delta, llama_delta)[0, 1] >= 0.95


@pytest.mark.slow  # 40-55 s: the default run stays near 20 minutes
def test_a_hint_to_answer_in_one_word_lowers_the_long_continuation(
    smollm2_gguf: Path, home: Path
) -> None:
    """A small real learning check on SmolLM2, measured in llama.cpp with the exported adapter."""
    with Store.open(home) as store:
        add_sample(store, smollm2_gguf, hint="Answer in one word only.", reward=-1, kind="opd+rl")
    summary = train.run(
        home,
        settings_for(smollm2_gguf),
        # 4 epochs lowered it by more than 1.0 nats on earlier CI machines and by 0.9 on another
        # CPU (llama.cpp is built for the machine it runs on); 6 lowered it by 1.9 there.
        cfg=small(train_epochs=6, batch_size=1, train_lr=1e-3, hint_placement="system"),
    )
    prompt = tokenize(
        smollm2_gguf,
        ChatTemplate.from_gguf(smollm2_gguf).render([{"role": "user", "content": QUESTION}]),
    )
    head = tokenize(smollm2_gguf, "The capital of France is Paris.")
    rest = tokenize(smollm2_gguf, LONG)[len(head) :]
    ids = prompt + head + rest
    cont = slice(len(prompt) + len(head) - 1, len(ids) - 1)  # log-probs of the continuation
    adapter = Path(summary["path"]) / "adapter.gguf"
    with_adapter = llama_logprobs(smollm2_gguf, ids, adapter)[cont].sum()
    without = llama_logprobs(smollm2_gguf, ids, None)[cont].sum()
    assert with_adapter < without - 1.0, (with_adapter, without)


def test_a_non_finite_loss_is_recorded_and_writes_no_adapter(
    tiny_qwen3_gguf: Path, home: Path
) -> None:
    with Store.open(home) as store:
        add_sample(store, tiny_qwen3_gguf, hint=None, reward=1, kind="rl")
        # A corrupt reward beyond float32's range makes the loss infinite.
        add_sample(store, tiny_qwen3_gguf, hint=None, reward=1e39, kind="rl")
    with pytest.raises(train.TrainingError, match="non-finite"):
        train.run(home, settings_for(tiny_qwen3_gguf), cfg=small())
    with Store.open(home) as store:
        run = next(store.db["training_runs"].rows)
        assert run["status"] == "failed" and "non-finite" in run["reason"]
        assert store.db["adapters"].count == 0
        assert {r["status"] for r in store.db["samples"].rows} == {"approved"}  # not used up
    assert [p.name for p in (home / "adapters").iterdir()] == []


def test_samples_too_long_to_train_are_dropped_not_taken_first_forever(
    tiny_qwen3_gguf: Path, home: Path
) -> None:
    """Once they stayed approved, were taken first by every run, and every run failed."""
    with Store.open(home) as store:
        long = [
            add_sample(store, tiny_qwen3_gguf, hint="Be brief.", reward=-1, kind="opd+rl"),
            add_sample(store, tiny_qwen3_gguf, hint=None, reward=1, kind="rl"),
        ]
    with pytest.raises(train.TrainingError, match="longer than 8 tokens"):
        train.run(home, settings_for(tiny_qwen3_gguf), cfg=small(n_ctx=8))
    with Store.open(home) as store:
        assert [store.db["samples"].get(i)["status"] for i in long] == ["dropped", "dropped"]
        assert any("can never train" in e["message"] for e in store.events(kind="train"))
        assert store.db["adapters"].count == 0
    with pytest.raises(train.NothingToTrain):  # no run takes them again
        train.run(home, settings_for(tiny_qwen3_gguf), cfg=small(n_ctx=8))


def test_the_gate_asks_the_users_own_prompts_newest_first_once_each() -> None:
    from clawd.training.batches import Example
    from clawd.training.update import own_prompts

    def ex(sample_id: int, prompt: list[int]) -> Example:
        return Example(sample_id, "rl", None, -1.0, prompt, prompt, [9])

    examples = [ex(1, [1]), ex(4, [2]), ex(3, [1]), ex(2, [3]), ex(5, [4])]
    assert own_prompts(examples, 16) == [[4], [2], [1], [3]]
    assert own_prompts(examples, 2) == [[4], [2]] and own_prompts(examples, 0) == []
    long = [ex(6, list(range(2000))), *examples]  # a long history: the gate's memory
    assert own_prompts(long, 16) == [[4], [2], [1], [3]]


def test_bad_settings_are_refused() -> None:
    """A user setting's bounds are checked once, by Settings; the constants' by TrainConfig."""
    with pytest.raises(ValueError, match="train_lr"):
        Settings(model="x", train_lr=5.0)
    with pytest.raises(ValueError, match="hint_placement"):
        Settings(model="x", hint_placement="nowhere")
    with pytest.raises(ValueError, match="gate_ability_alpha"):
        train.TrainConfig(gate_ability_alpha=1.0)
    with pytest.raises(ValueError, match="batch_size"):
        train.TrainConfig(batch_size=0)


def test_a_method_trains_only_on_samples_it_can_learn_from(
    tiny_qwen3_gguf: Path, home: Path
) -> None:
    """OPD alone learns nothing from a hint-less sample: no run, no adapter, nothing used up."""
    with Store.open(home) as store:
        scored = add_sample(store, tiny_qwen3_gguf, hint=None, reward=-1, kind="rl")
        assert store.waiting_samples(LEARNABLE_KINDS["opd"]) == (1, 0)
    opd = small(train_method="opd")
    assert (opd.w_opd, opd.w_rl) == (1.0, 0.0)
    with pytest.raises(train.NothingToTrain, match="'opd' needs samples with a hint"):
        train.run(home, settings_for(tiny_qwen3_gguf), cfg=opd)
    with Store.open(home) as store:
        assert store.db["training_runs"].count == 0
        assert store.db["samples"].get(scored)["status"] == "approved"
        hinted = add_sample(
            store, tiny_qwen3_gguf, hint="Answer in one word.", reward=0, kind="opd"
        )
        assert store.waiting_samples(LEARNABLE_KINDS["opd"]) == (2, 1)
    summary = train.run(home, settings_for(tiny_qwen3_gguf), cfg=opd)
    manifest = json.loads((Path(summary["path"]) / "manifest.json").read_text())
    assert manifest["samples"] == [hinted]
    with Store.open(home) as store:  # the scored sample waits for a method that can use it
        assert store.db["samples"].get(scored)["status"] == "approved"
        assert store.waiting_samples(LEARNABLE_KINDS["combined"]) == (1, 1)


def test_replies_that_all_scored_the_same_teach_nothing_and_start_no_run(
    tiny_qwen3_gguf: Path, home: Path
) -> None:
    """Every answer a complaint and no hint: the centred reward is 0 on every token, so a run
    would spend drift budget on its penalty and unlikelihood alone. It is refused, with why, and
    the samples wait; a thanked answer, new or replayed, sets them apart."""
    settings = settings_for(tiny_qwen3_gguf)
    with Store.open(home) as store:
        ids = [
            add_sample(store, tiny_qwen3_gguf, hint=None, reward=-1, kind="rl", question=q)
            for q in ("Name a colour.", "Name a fruit.")
        ]
        assert "scored -1" in str(why_no_run(store, "rl", 16))
        assert "none has a hint" in str(why_no_run(store, "combined", 16))
    for cfg in (small(train_method="rl"), small()):
        with pytest.raises(train.NothingToTrain, match="all 2 samples a run would take scored -1"):
            train.run(home, settings, cfg=cfg)
    with Store.open(home) as store:
        assert store.db["training_runs"].count == 0
        assert {store.db["samples"].get(i)["status"] for i in ids} == {"approved"}
        thanked = add_sample(store, tiny_qwen3_gguf, hint=None, reward=1, kind="rl")
        assert why_no_run(store, "rl", 16) is None
    summary = train.run(home, settings, cfg=small(train_method="rl", train_epochs=1))
    manifest = json.loads((Path(summary["path"]) / "manifest.json").read_text())
    assert sorted(manifest["samples"]) == sorted([*ids, thanked])
    with Store.open(home) as store:  # new complaints, set apart by the replayed thanks
        add_sample(store, tiny_qwen3_gguf, hint=None, reward=-1, kind="rl", question="A tree?")
        new, replay = store.run_samples(LEARNABLE_KINDS["rl"], 16)
        assert len(new) == 1 and [r["id"] for r in replay] == [thanked]  # newest, one per new
        assert why_no_run(store, "rl", 16) is None
        assert "scored -1" in str(why_no_run(store, "rl", 0))  # no replay: all complaints


def test_the_method_setting_chooses_the_advantage_terms() -> None:
    weights = {
        m: (c.w_opd, c.w_rl)
        for m in ("combined", "rl", "opd")
        for c in [train.TrainConfig.from_settings(Settings(model="x", train_method=m))]
    }
    assert weights == {"combined": (1.0, 1.0), "rl": (0.0, 1.0), "opd": (1.0, 0.0)}
    with pytest.raises(ValueError, match="train_method"):
        Settings(model="x", train_method="both")


def test_a_run_warm_starts_from_the_active_adapter(tiny_qwen3_gguf: Path, home: Path) -> None:
    from safetensors.torch import load_file

    with Store.open(home) as store:
        add_sample(
            store, tiny_qwen3_gguf, hint="Answer in one word only.", reward=-1, kind="opd+rl"
        )
    first = train.run(home, settings_for(tiny_qwen3_gguf), cfg=small(train_epochs=1))
    with Store.open(home) as store:
        store.db["adapters"].update(first["version"], {"status": "active"})
        add_sample(store, tiny_qwen3_gguf, hint=None, reward=1, kind="rl", answer="Paris.")
    second = train.run(
        home, settings_for(tiny_qwen3_gguf), cfg=small(train_epochs=1, train_lr=1e-6)
    )
    manifest = json.loads((Path(second["path"]) / "manifest.json").read_text())
    assert manifest["parent"] == first["version"]
    a = load_file(str(Path(first["path"]) / "peft" / "adapter_model.safetensors"))
    b = load_file(str(Path(second["path"]) / "peft" / "adapter_model.safetensors"))
    # A tiny learning rate moves the weights a little from the parent's, not from zero.
    key = next(k for k in a if "lora_B" in k)
    assert torch.count_nonzero(a[key]) > 0
    assert torch.allclose(a[key], b[key], atol=1e-3) and not torch.equal(a[key], b[key])


def test_training_threads_do_not_spin_unless_the_user_says_how() -> None:
    assert openmp_env({}) == {"GOMP_SPINCOUNT": "1000"}
    assert openmp_env({"OMP_WAIT_POLICY": "ACTIVE"}) == {}  # the user's choice stands
    assert openmp_env({"GOMP_SPINCOUNT": "300000"}) == {}
    # a Ray worker is told what the trainer has, or clawd's setting where it has nothing
    passive = {"OMP_WAIT_POLICY": "PASSIVE"}
    assert openmp_wait({**passive, "PATH": "/bin"}) == passive
    assert openmp_wait({}) == {"GOMP_SPINCOUNT": "1000"}
