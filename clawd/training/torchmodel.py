"""The served GGUF as a torch model: the very weights llama.cpp serves, for the trainer.

transformers dequantizes a GGUF into torch (``from_pretrained(dir, gguf_file=name)``), which
takes 10-25 s for the 135M model; the result is cached under
``CLAWD_HOME/cache/torch/<sha256 prefix>-<dtype>/`` (safetensors plus tokenizer) so the next run
loads it in a second or two. On CUDA the cached weights load in 4-bit NF4 with bfloat16 compute
(QLoRA); on CPU they stay fp32 (or bf16).

Run alone to build the cache for the default model::

    python -m clawd.training.torchmodel
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from clawd.models import sha256_file


def cache_dir(home: Path, gguf: Path, dtype: torch.dtype, digest: str | None = None) -> Path:
    digest = digest or sha256_file(gguf)
    return home / "cache" / "torch" / f"{digest[:16]}-{str(dtype).removeprefix('torch.')}"


def _convert(gguf: Path, target: Path, dtype: torch.dtype) -> None:
    """Dequantize the GGUF once and save it; written aside and renamed, never half-there."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=dtype)
        # The weights are plain tensors now; forget the GGUF "quantizer" so they can be saved.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        try:
            tmp.replace(target)
        except OSError:
            # Another trainer sharing this cache (a second daemon) finished first: its copy is
            # the same conversion, complete (it too appeared by a rename).
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load(
    gguf: Path,
    home: Path,
    *,
    device: str = "cpu",
    qlora: bool = False,
    dtype: torch.dtype = torch.float32,
    digest: str | None = None,
) -> tuple[Any, Any]:
    """(model, tokenizer) for ``gguf``; ``qlora`` loads 4-bit NF4 weights (CUDA only)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if qlora and device != "cuda":
        raise ValueError("QLoRA (4-bit) needs a CUDA device; use plain LoRA on CPU")
    saved_dtype = torch.bfloat16 if qlora else dtype
    target = cache_dir(home, gguf, saved_dtype, digest)
    if not (target / "config.json").exists():
        _convert(gguf, target, saved_dtype)
    tok = AutoTokenizer.from_pretrained(target)
    kwargs: dict[str, Any] = {"dtype": saved_dtype}
    if qlora:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16,
        )
        kwargs["device_map"] = {"": 0}
    model = AutoModelForCausalLM.from_pretrained(target, **kwargs)
    if not qlora:
        model.to(device)
    return model, tok


def response_log_softmax(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    start: torch.Tensor,
    length: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The next-token distributions that predict positions ``start_b .. start_b + length - 1``.

    Args:
        input_ids, attention_mask: (B, L) right-padded.
        start: (B,) index of each row's first response token.
    Returns:
        ``(logp, targets)``: (B, length, V) log-softmax over the vocabulary at each response
        position and (B, length) the token actually there; positions past a row's end are
        garbage and must be masked by the caller.
    """
    # Run the decoder, then the LM head only where a response token is predicted: the head
    # (vocab x hidden) costs as much as a small model's whole body per position.
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    hidden = base.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    positions = start[:, None] + torch.arange(length, device=input_ids.device)[None, :]  # (B, T)
    positions = positions.clamp(max=input_ids.shape[1] - 1)
    prev = (positions - 1).clamp(min=0)
    h = torch.gather(hidden, 1, prev[:, :, None].expand(-1, -1, hidden.shape[-1]))  # (B, T, H)
    step_logits = base.lm_head(h).float()  # (B, T, V)
    targets = torch.gather(input_ids, 1, positions)  # (B, T)
    return torch.log_softmax(step_logits, dim=-1), targets


def token_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    start: torch.Tensor,
    length: int,
) -> torch.Tensor:
    """Log-probs of the tokens at positions ``start_b .. start_b + length - 1`` of each row:
    (B, length) log p(token_t | tokens before t), garbage past a row's end (mask it)."""
    logp, targets = response_log_softmax(model, input_ids, attention_mask, start, length)
    return log_probs_of(logp, targets)


def log_probs_of(logp: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``logp`` (B, T, V) read at ``ids`` (B, T): (B, T)."""
    return torch.gather(logp, 2, ids[:, :, None]).squeeze(-1)


def end_tokens(tok: Any) -> list[int]:
    """The tokenizer's eos and the end-of-turn tokens a chat template may use, each once, eos
    first."""
    names = ("<|im_end|>", "<|eot_id|>", "<|endoftext|>")
    ids = [tok.eos_token_id, *(tok.convert_tokens_to_ids(t) for t in names)]
    return [i for i in dict.fromkeys(ids) if isinstance(i, int) and i != tok.unk_token_id]


if __name__ == "__main__":
    import time

    from clawd.config import clawd_home, load_settings
    from clawd.models import resolve

    home = clawd_home()
    path = resolve(load_settings(home).model, home)
    t0 = time.perf_counter()
    model, _ = load(path, home)
    print(
        f"{type(model).__name__} from {path.name} in {time.perf_counter() - t0:.1f}s, "
        f"cached at {cache_dir(home, path, torch.float32)}"
    )
