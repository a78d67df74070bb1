"""Export a PEFT LoRA adapter to llama.cpp's GGUF LoRA format.

What llama.cpp accepts: metadata ``general.type = "adapter"``, ``general.architecture`` = the
base model's, ``adapter.type = "lora"``, ``adapter.lora.alpha`` (float32); tensors named
``<base tensor name>.lora_a`` / ``.lora_b`` (e.g. ``blk.0.attn_q.weight.lora_a``) holding PEFT's
A (r x in) and B (out x r) as they are (the gguf writer reverses numpy shapes into ggml order).
The effective scale is user scale x alpha / r, so rsLoRA must not be used.

For llama-architecture models the HF-to-GGUF converter permutes the rows of q_proj and k_proj
for llama.cpp's rotary layout, and transformers undoes that when it loads a GGUF. The LoRA B of
q/k (whose rows are output rows) must be permuted the same way, or the adapter loads and runs
but does the wrong thing. Qwen2/Qwen3 are not permuted.

Run alone::

    python -m clawd.adapters.export PEFT_DIR BASE.gguf OUT.gguf
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

PERMUTED_ARCHS = {"llama"}
LAYER_RE = re.compile(r"(?:^|\.)layers\.(\d+)\.(self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")


class ExportError(Exception):
    """The adapter cannot be written in a form llama.cpp would apply correctly."""


def permute_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """The converter's q/k row permutation (heads x 2 x half-dim -> heads x half-dim x 2)."""
    rows = w.shape[0]
    return w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _base_info(base_gguf: Path) -> tuple[str, int, int, int]:
    from gguf import GGUFReader

    fields = GGUFReader(str(base_gguf)).fields
    arch = str(fields["general.architecture"].contents())
    n_layers = int(fields[f"{arch}.block_count"].contents())
    n_head = int(fields[f"{arch}.attention.head_count"].contents())
    kv_key = f"{arch}.attention.head_count_kv"
    n_head_kv = int(fields[kv_key].contents()) if kv_key in fields else n_head
    return arch, n_layers, n_head, n_head_kv


def export_gguf(peft_dir: Path, base_gguf: Path, out: Path) -> Path:
    """Write ``out`` (atomically) from the PEFT folder ``peft_dir``; returns ``out``."""
    import gguf
    from safetensors.numpy import load_file

    config = json.loads((peft_dir / "adapter_config.json").read_text())
    if config.get("use_rslora"):
        raise ExportError("rsLoRA adapters scale differently from what llama.cpp applies")
    if config.get("use_dora"):
        raise ExportError("DoRA adapters are not supported by llama.cpp's LoRA loader")
    r, alpha = int(config["r"]), float(config["lora_alpha"])
    arch, n_layers, n_head, n_head_kv = _base_info(base_gguf)
    arch_enum = next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch)
    names = gguf.get_tensor_name_map(arch_enum, n_layers)
    tensors = load_file(str(peft_dir / "adapter_model.safetensors"))

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".gguf.tmp")
    writer = gguf.GGUFWriter(str(tmp), arch)
    writer.add_string("general.type", "adapter")
    writer.add_string("general.name", f"clawd LoRA r{r}")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", alpha)
    written = 0
    for key in sorted(tensors):
        m = LAYER_RE.search(key)
        if not m:
            raise ExportError(
                f"unexpected tensor {key!r}: only attention/MLP projections "
                "of the decoder layers can be exported"
            )
        layer, block, proj, ab = m.groups()
        hf_name = f"model.layers.{layer}.{block}.{proj}"
        base = names.get_name(hf_name + ".weight", try_suffixes=(".weight",))
        if base is None:
            raise ExportError(f"no GGUF name for {hf_name} in architecture {arch}")
        w = tensors[key].astype(np.float32)
        if ab == "B" and arch in PERMUTED_ARCHS and proj in ("q_proj", "k_proj"):
            w = permute_rows(w, n_head if proj == "q_proj" else n_head_kv)
        writer.add_tensor(f"{base}.lora_{ab.lower()}", np.ascontiguousarray(w))
        written += 1
    if written == 0:
        raise ExportError(f"{peft_dir} holds no LoRA tensors")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)
    return out


if __name__ == "__main__":
    path = export_gguf(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
    print(f"wrote {path}")
