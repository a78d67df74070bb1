"""Write a tiny random-weight Qwen3 GGUF: the second fixture architecture for tests and benches.

The product is for Qwen3 but no Qwen3 weights can be downloaded on a machine without a model
hub, so tests build one: hidden 64, 2 layers, 4 query heads, 2 KV heads, head_dim 128 (every
real Qwen3 has 128, and transformers' GGUF loader assumes it), fp32 tensors, and the tokenizer
(vocabulary, merges, special tokens, chat template) copied from another GGUF such as SmolLM2.
It loads in llama.cpp and in transformers, whose fp32 logits agree to about 1e-5.

Run alone::

    python -m clawd.tinymodel OUT.gguf --tokenizer-from SmolLM2-135M-Instruct.Q4_1.gguf
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class TinyQwen3Config:
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 128
    ffn: int = 128
    context_length: int = 4096
    rope_theta: float = 1_000_000.0
    rms_eps: float = 1e-6
    init_std: float = 0.1
    seed: int = 0


# The generation-prompt behaviour of Qwen3's template, including its thinking switch.
QWEN3_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"
)


def _copy_tokenizer(reader, writer) -> None:  # (GGUFReader, GGUFWriter)
    from gguf import GGUFValueType

    for key, field in reader.fields.items():
        if not key.startswith("tokenizer.") or key == "tokenizer.chat_template":
            continue
        vtype = field.types[0]
        if vtype == GGUFValueType.ARRAY:
            writer.add_key_value(key, list(field.contents()), vtype, sub_type=field.types[-1])
        else:
            writer.add_key_value(key, field.contents(), vtype)


def write_tiny_qwen3(
    out: Path, tokenizer_from: Path, config: TinyQwen3Config | None = None
) -> Path:
    """Write the tiny Qwen3 to ``out`` (atomically) and return the path."""
    from gguf import GGUFReader, GGUFWriter, LlamaFileType

    cfg = config or TinyQwen3Config()
    reader = GGUFReader(str(tokenizer_from))
    vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    rng = np.random.default_rng(cfg.seed)

    def weight(rows: int, cols: int) -> np.ndarray:  # (out, in), as a torch Linear stores it
        return (rng.standard_normal((rows, cols)) * cfg.init_std).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".gguf.tmp")
    writer = GGUFWriter(str(tmp), "qwen3")
    writer.add_name("tiny-qwen3-random")
    writer.add_file_type(LlamaFileType.ALL_F32)
    writer.add_context_length(cfg.context_length)
    writer.add_embedding_length(cfg.hidden)
    writer.add_block_count(cfg.layers)
    writer.add_feed_forward_length(cfg.ffn)
    writer.add_head_count(cfg.heads)
    writer.add_head_count_kv(cfg.kv_heads)
    writer.add_key_length(cfg.head_dim)
    writer.add_value_length(cfg.head_dim)
    writer.add_rope_freq_base(cfg.rope_theta)
    writer.add_layer_norm_rms_eps(cfg.rms_eps)
    _copy_tokenizer(reader, writer)
    writer.add_chat_template(QWEN3_CHAT_TEMPLATE)

    q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    writer.add_tensor("token_embd.weight", weight(vocab, cfg.hidden))  # (V, H)
    writer.add_tensor("output_norm.weight", norm(cfg.hidden))
    writer.add_tensor("output.weight", weight(vocab, cfg.hidden))  # (V, H)
    for i in range(cfg.layers):
        blk = f"blk.{i}"
        writer.add_tensor(f"{blk}.attn_norm.weight", norm(cfg.hidden))
        writer.add_tensor(f"{blk}.attn_q.weight", weight(q, cfg.hidden))
        writer.add_tensor(f"{blk}.attn_k.weight", weight(kv, cfg.hidden))
        writer.add_tensor(f"{blk}.attn_v.weight", weight(kv, cfg.hidden))
        writer.add_tensor(f"{blk}.attn_output.weight", weight(cfg.hidden, q))
        writer.add_tensor(f"{blk}.attn_q_norm.weight", norm(cfg.head_dim))
        writer.add_tensor(f"{blk}.attn_k_norm.weight", norm(cfg.head_dim))
        writer.add_tensor(f"{blk}.ffn_norm.weight", norm(cfg.hidden))
        writer.add_tensor(f"{blk}.ffn_gate.weight", weight(cfg.ffn, cfg.hidden))
        writer.add_tensor(f"{blk}.ffn_up.weight", weight(cfg.ffn, cfg.hidden))
        writer.add_tensor(f"{blk}.ffn_down.weight", weight(cfg.hidden, cfg.ffn))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where to write the .gguf")
    parser.add_argument(
        "--tokenizer-from",
        type=Path,
        required=True,
        help="a GGUF whose tokenizer metadata is copied (e.g. SmolLM2)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed of the weights")
    args = parser.parse_args()
    path = write_tiny_qwen3(args.out, args.tokenizer_from, TinyQwen3Config(seed=args.seed))
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
