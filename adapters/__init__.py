"""Adapter lifecycle: GGUF LoRA export, the versioned store, the promotion gate, hot-load."""
