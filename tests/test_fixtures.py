"""Both fixture models load in both runtimes, and the runtimes agree on what they compute."""

from pathlib import Path

import numpy as np
import pytest
import torch

TEXT = "The quick brown fox jumps over the lazy dog. Paris is the capital of France."


def llama_logits(path: Path, tokens: list[int]) -> np.ndarray:
    from llama_cpp import GGML_TYPE_F32, Llama

    # An fp32 KV cache, so that only the weights' own precision differs between runtimes.
    llm = Llama(
        str(path),
        n_ctx=256,
        logits_all=True,
        verbose=False,
        n_threads=2,
        type_k=GGML_TYPE_F32,
        type_v=GGML_TYPE_F32,
    )
    llm.eval(tokens)
    return np.array(llm.scores[: len(tokens)])  # (T, V)


def torch_model_and_tokens(path: Path) -> tuple[torch.nn.Module, list[int]]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    )
    return model.eval(), tok(TEXT)["input_ids"]


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_tiny_qwen3_fp32_logits_agree(tiny_qwen3_gguf: Path) -> None:
    model, tokens = torch_model_and_tokens(tiny_qwen3_gguf)
    assert model.config.model_type == "qwen3"
    with torch.no_grad():
        ours = model(torch.tensor([tokens])).logits[0].numpy()  # (T, V)
    theirs = llama_logits(tiny_qwen3_gguf, tokens)
    assert ours.shape == theirs.shape
    assert np.abs(ours - theirs).max() < 1e-4


@pytest.mark.parametrize("name", ["smollm2_gguf", "tiny_qwen3_gguf"])
def test_tokenizers_agree(name: str, request: pytest.FixtureRequest) -> None:
    from llama_cpp import Llama

    path = request.getfixturevalue(name)
    _, tokens = torch_model_and_tokens(path)
    llm = Llama(str(path), n_ctx=64, vocab_only=True, verbose=False)
    assert llm.tokenize(TEXT.encode(), add_bos=False, special=True) == tokens


def test_smollm2_log_probs_agree_within_quantization_noise(smollm2_gguf: Path) -> None:
    model, tokens = torch_model_and_tokens(smollm2_gguf)
    assert model.config.model_type == "llama"
    with torch.no_grad():
        ours = torch.log_softmax(model(torch.tensor([tokens])).logits[0], -1).numpy()
    theirs = log_softmax(llama_logits(smollm2_gguf, tokens))
    idx = np.arange(len(tokens) - 1)
    # Log-prob each runtime gives the text's next token; llama.cpp quantizes activations in
    # its matmuls, so about 0.04 nats of disagreement is the floor (DESIGN.md).
    diff = np.abs(ours[idx, tokens[1:]] - theirs[idx, tokens[1:]])
    assert diff.mean() < 0.15, diff
    # ...and both find the text far more likely than chance.
    assert ours[idx, tokens[1:]].mean() > -np.log(model.config.vocab_size) + 3
