"""Real GGUF LoRA adapters for tests and benches, registered in a CLAWD_HOME without training.

A PEFT LoRA with random weights (scale chosen by the caller) is exported with the product's
exporter and published through the product's registry, so everything downstream (verify,
hot-load, gate, rollback) runs on real files.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from adapters import registry
from adapters.export import export_gguf
from clawd.models import sha256_file
from clawd.store.db import Store
from clawd.training import torchmodel


def random_lora(gguf: Path, torch_home: Path, *, seed: int, scale: float) -> tuple[Any, Any]:
    """(peft model, tokenizer): a LoRA (r 8, all projections) with random A and B weights."""
    from peft import LoraConfig, get_peft_model

    model, tok = torchmodel.load(gguf, torch_home)
    config = LoraConfig(
        r=8,
        lora_alpha=16,
        lora_dropout=0.0,
        use_rslora=False,
        target_modules=[
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ],
    )
    peft = get_peft_model(model, config)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * scale)
    return peft, tok


def make_adapter(gguf: Path, torch_home: Path, out: Path, *, seed: int, scale: float) -> Path:
    """Export a random LoRA for ``gguf`` into ``out``/adapter.gguf (and ``out``/peft)."""
    peft, _ = random_lora(gguf, torch_home, seed=seed, scale=scale)
    out.mkdir(parents=True, exist_ok=True)
    peft.save_pretrained(out / "peft")
    export_gguf(out / "peft", gguf, out / "adapter.gguf")
    return out / "adapter.gguf"


def fit_answer(
    gguf: Path,
    torch_home: Path,
    tmp: Path,
    prompts: list[list[int]],
    answer: list[int],
    out: Path,
    steps: int = 60,
) -> Path:
    """A LoRA fitted (``steps`` steps, lr 1e-2) to answer each of ``prompts`` with ``answer``
    and an end of turn, exported to ``out``: a collapsed adapter, on real files."""
    from peft import LoraConfig, get_peft_model

    model, tok = torchmodel.load(gguf, torch_home)
    peft = get_peft_model(
        model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "down_proj"])
    )
    answer = [*answer, tok.convert_tokens_to_ids("<|im_end|>")]
    opt = torch.optim.AdamW([p for p in peft.parameters() if p.requires_grad], lr=1e-2)
    torch.manual_seed(0)
    for step in range(steps):
        prompt = prompts[step % len(prompts)]
        ids = torch.tensor([prompt + answer])
        labels = torch.tensor([[-100] * len(prompt) + answer])
        loss = peft(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    peft.save_pretrained(tmp / "peft")
    export_gguf(tmp / "peft", gguf, out)
    return out


def register(
    home: Path,
    gguf: Path,
    torch_home: Path,
    version: str,
    *,
    seed: int,
    scale: float = 0.05,
    parent: str | None = None,
    gate: dict[str, Any] | None = None,
    base_sha256: str | None = None,
) -> str:
    """Publish a random adapter as ``version`` (status from the gate: candidate or rejected)."""
    gate = gate if gate is not None else {"passed": True, "checks": {}, "kl_to_base": 0.0}
    root = registry.adapters_dir(home)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=".tmp-"))
    make_adapter(gguf, torch_home, tmp, seed=seed, scale=scale)
    with Store.open(home) as store:
        run_id = (
            store.db["training_runs"]
            .insert({"status": "succeeded", "started_at": time.time()})
            .last_pk
        )
        manifest = {
            "version": version,
            "parent": parent,
            "base_model": gguf.name,
            "base_sha256": base_sha256 or sha256_file(gguf),
            "created_at": time.time(),
            "run_id": run_id,
            "samples": [],
            "heldout": [],
            "status": "candidate" if gate.get("passed") else "rejected",
            "gate": gate,
            "metrics": {"steps": 0},
        }
        registry.add_candidate(store, home, tmp, manifest, [], [])
    return version
