"""Hot-load: put a GGUF LoRA adapter into the running engine between two requests.

The adapter file is read and checked while the engine keeps serving
(``llama_adapter_lora_init``); the switch itself (``llama_set_adapters_lora`` on the serving
context, clearing the prompt/KV cache so that no answer mixes two adapters, freeing the old
adapter) runs on the engine's worker between two requests. A request in flight finishes on the
adapter it started with; the next one starts on the new one, and every turn records its version.

Run alone to compare an answer with and without an adapter::

    python -m clawd.serving.hotload BASE.gguf ADAPTER.gguf "Question?"
"""

from __future__ import annotations

import ctypes
import sys
import time
from pathlib import Path
from typing import Any

from clawd.serving.engine import Engine, EngineError


class AdapterLoadError(EngineError):
    """llama.cpp refused the adapter file, or it was made for another architecture."""


def _meta(adapter: Any, key: str) -> str | None:
    import llama_cpp

    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_adapter_meta_val_str(adapter, key.encode(), buf, len(buf))
    return buf.value.decode() if n >= 0 else None


def load_adapter(engine: Engine, path: Path) -> Any:
    """Read an adapter for ``engine``'s model; raises AdapterLoadError."""
    import llama_cpp

    if not Path(path).is_file():
        raise AdapterLoadError(f"adapter file {path} does not exist")
    ptr = llama_cpp.llama_adapter_lora_init(engine.llm.model, str(path).encode())
    if not ptr:
        raise AdapterLoadError(f"llama.cpp could not load the adapter {path}")
    arch = _meta(ptr, "general.architecture")
    if arch and arch != engine.architecture:
        llama_cpp.llama_adapter_lora_free(ptr)
        raise AdapterLoadError(f"adapter {path} is for {arch}, the model is {engine.architecture}")
    return ptr


def switch(engine: Engine, adapter: Any | None, version: str | None, scale: float = 1.0) -> float:
    """Make ``adapter`` (None: the base model) the active one between two requests.

    Returns how long the engine was paused for the switch, in milliseconds.
    """
    import llama_cpp

    def swap() -> float:
        t0 = time.perf_counter()
        ctx = engine.llm._ctx.ctx
        if adapter is None:
            rc = llama_cpp.llama_set_adapters_lora(ctx, None, 0, None)
        else:
            arr = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(adapter)
            scales = (ctypes.c_float * 1)(scale)
            rc = llama_cpp.llama_set_adapters_lora(ctx, arr, 1, scales)
        if rc != 0:
            raise AdapterLoadError(f"llama.cpp refused to set the adapter (code {rc})")
        # A cached prompt was computed under the old adapter: reusing it would mix the two.
        engine.llm._ctx.kv_cache_clear()
        engine.llm.reset()
        old, engine.adapter_ptr = getattr(engine, "adapter_ptr", None), adapter
        engine.adapter_version = version
        if old is not None and old is not adapter:
            llama_cpp.llama_adapter_lora_free(old)
        return (time.perf_counter() - t0) * 1000

    return engine.between_requests(swap)


def activate(engine: Engine, path: Path | None, version: str | None) -> float:
    """Load ``path`` (None: back to the base model) and switch to it; returns the pause in ms."""
    adapter = load_adapter(engine, path) if path is not None else None
    try:
        return switch(engine, adapter, version)
    except BaseException:
        if adapter is not None:
            import llama_cpp

            llama_cpp.llama_adapter_lora_free(adapter)
        raise


if __name__ == "__main__":
    from clawd.serving.engine import GenParams, generate_blocking

    eng = Engine(Path(sys.argv[1]), n_ctx=1024)
    eng.load()
    prompt = eng.tokenize(eng.render([{"role": "user", "content": sys.argv[3]}]))
    print(
        "base:   ", generate_blocking(eng, prompt, GenParams(temperature=0, max_tokens=48)).content
    )
    print(f"switch: {activate(eng, Path(sys.argv[2]), 'cli'):.1f} ms")
    print(
        "adapter:", generate_blocking(eng, prompt, GenParams(temperature=0, max_tokens=48)).content
    )
    eng.close()
