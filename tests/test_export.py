"""The GGUF LoRA export changes llama.cpp's log-probs the way PEFT changes torch's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from clawd.adapters.export import ExportError, export_gguf, permute_rows
from fixtures.adapterkit import random_lora

TEXT = "The quick brown fox jumps over the lazy dog. Paris is the capital of France, and"


def lora_model(gguf: Path, home: Path, seed: int = 0, scale: float = 0.05):
    """A strong, random adapter: its effect must dwarf quantization noise."""
    return random_lora(gguf, home, seed=seed, scale=scale)


def torch_logprobs(model, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    lp = torch.log_softmax(logits.float(), -1)
    return lp[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].numpy()


def llama_logprobs(gguf: Path, ids: list[int], lora: Path | None) -> np.ndarray:
    from llama_cpp import GGML_TYPE_F32, Llama

    llm = Llama(
        str(gguf),
        n_ctx=256,
        logits_all=True,
        verbose=False,
        n_threads=2,
        lora_path=str(lora) if lora else None,
        type_k=GGML_TYPE_F32,
        type_v=GGML_TYPE_F32,
    )
    llm.eval(ids)
    scores = np.array(llm.scores[: len(ids)])
    scores -= scores.max(-1, keepdims=True)
    lp = scores - np.log(np.exp(scores).sum(-1, keepdims=True))
    llm.close()
    return lp[np.arange(len(ids) - 1), ids[1:]]


def adapter_effect_correlation(gguf: Path, peft, tok, out: Path) -> float:
    peft.save_pretrained(out / "peft")
    adapter = export_gguf(out / "peft", gguf, out / "adapter.gguf")
    ids = tok(TEXT)["input_ids"]
    with peft.disable_adapter():
        torch_base = torch_logprobs(peft, ids)
    torch_delta = torch_logprobs(peft, ids) - torch_base
    llama_delta = llama_logprobs(gguf, ids, adapter) - llama_logprobs(gguf, ids, None)
    assert np.abs(torch_delta).mean() > 0.1  # the adapter does something
    return float(np.corrcoef(torch_delta, llama_delta)[0, 1])


def test_export_matches_peft(any_gguf: Path, torch_cache: Path, tmp_path: Path) -> None:
    peft, tok = lora_model(any_gguf, torch_cache)
    assert adapter_effect_correlation(any_gguf, peft, tok, tmp_path) >= 0.95


def test_the_rotary_permutation_is_needed_for_llama(
    smollm2_gguf: Path, torch_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the q/k permutation the adapter still loads, and is measurably wrong."""
    import clawd.adapters.export as export

    peft, tok = lora_model(smollm2_gguf, torch_cache, seed=1)
    for name, p in peft.named_parameters():  # only q/k adapted: the permuted part
        if "lora_" in name and not any(k in name for k in ("q_proj", "k_proj")):
            p.data.zero_()
    right = adapter_effect_correlation(smollm2_gguf, peft, tok, tmp_path / "right")
    monkeypatch.setattr(export, "PERMUTED_ARCHS", set())
    wrong = adapter_effect_correlation(smollm2_gguf, peft, tok, tmp_path / "wrong")
    print(f"correlation with permutation {right:.3f}, without {wrong:.3f}")
    # q/k alone act through the softmax, where llama.cpp's quantized activations add more noise
    # than on the full adapter (>= 0.95 above); the unpermuted export is uncorrelated. Seen:
    # 0.850 / -0.146 on 2026-12-01 (so the bound leaves room for build and thread noise).
    assert right >= 0.8 and wrong < 0.3


def test_permute_rows_matches_the_converter_layout() -> None:
    w = np.arange(8 * 3).reshape(8, 3)
    p = permute_rows(w, n_head=2)
    # head 0 rows 0..3 are [first half 0,1 | second half 2,3] -> interleaved 0,2,1,3
    assert [row[0] for row in p[:4]] == [0, 6, 3, 9]


def test_rslora_is_refused(tmp_path: Path, smollm2_gguf: Path) -> None:
    (tmp_path / "adapter_config.json").write_text('{"r": 8, "lora_alpha": 16, "use_rslora": true}')
    with pytest.raises(ExportError, match="rsLoRA"):
        export_gguf(tmp_path, smollm2_gguf, tmp_path / "a.gguf")
