"""The model's own chat template, rendered outside llama.cpp, and the teacher context.

``ChatTemplate`` renders a GGUF's ``tokenizer.chat_template`` with jinja2 (sandboxed) the way
llama.cpp-based servers do; the engine, the judge and the trainer all use it, so the teacher
prompt is built exactly like the prompts the user's answers came from. ``teacher_messages`` puts
a hint into a copy of the prompt messages: appended to the last user message (the paper's choice) or
as a system message (which concentrated the penalty on the right token in probes on SmolLM2).

Run alone to render a hinted prompt::

    python -m clawd.chattemplate MODEL.gguf "What is 2+2?" "Answer in one word."
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any, Literal

from jinja2.sandbox import ImmutableSandboxedEnvironment

HINT_HEADER = "[user's hint / instruction]"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"  # a thinking model's reasoning block (Qwen3)
Placement = Literal["user", "system"]


class TemplateError(Exception):
    """The template is missing or failed on these messages."""


def _raise(message: str) -> None:
    raise TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """``tojson`` as chat templates are written for (transformers' renderer): keys in their
    order and no HTML escaping. Jinja's own sorts the keys and writes ``<`` as ``\\u003c``, so
    a tool's JSON would not read as what the model was trained on."""
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


class ChatTemplate:
    def __init__(self, template: str, bos_token: str = "", eos_token: str = "") -> None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise
        env.filters["tojson"] = _tojson
        self._template = env.from_string(template)
        self.bos_token, self.eos_token = bos_token, eos_token

    @classmethod
    def from_gguf(cls, path: Path) -> ChatTemplate:
        from gguf import GGUFReader

        reader = GGUFReader(str(path))
        fields = reader.fields
        if "tokenizer.chat_template" not in fields:
            raise TemplateError(f"{path} has no chat template")
        tokens = fields["tokenizer.ggml.tokens"]

        def token(key: str) -> str:
            if key not in fields:
                return ""
            idx = int(fields[key].contents())
            return bytes(tokens.parts[tokens.data[idx]]).decode("utf-8")

        return cls(
            fields["tokenizer.chat_template"].contents(),
            token("tokenizer.ggml.bos_token_id"),
            token("tokenizer.ggml.eos_token_id"),
        )

    @classmethod
    def from_llama(cls, llm: Any, source: Path | str = "the model") -> ChatTemplate:
        """The template of a loaded ``llama_cpp.Llama``, with its BOS and EOS token texts."""
        template = llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise TemplateError(f"{source} has no chat template")
        # llama-cpp-python has no public call for a special token's text; its model wrapper does.
        vocab = llm._model

        def text(tok: int) -> str:
            return vocab.token_get_text(tok) if tok >= 0 else ""

        return cls(template, text(llm.token_bos()), text(llm.token_eos()))

    def render(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **kwargs: Any
    ) -> str:
        try:
            return self._template.render(
                messages=messages,
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                **kwargs,
            )
        except TemplateError:
            raise
        except Exception as exc:  # jinja raises many kinds
            raise TemplateError(f"the chat template failed on these messages: {exc}") from exc


def teacher_messages(
    messages: list[dict[str, Any]], hint: str, placement: Placement = "user"
) -> list[dict[str, Any]]:
    """A copy of ``messages`` that carries ``hint``.

    ``user``: appended to the last user message as ``\\n\\n[user's hint / instruction]\\n<hint>``.
    ``system``: appended to a leading system message, or a new one inserted at the start.
    """
    out = copy.deepcopy(messages)
    if placement == "system":
        if out and out[0].get("role") == "system":
            out[0]["content"] = f"{out[0].get('content') or ''}\n\n{hint}".strip()
        else:
            out.insert(0, {"role": "system", "content": hint})
        return out
    for message in reversed(out):
        if message.get("role") == "user":
            message["content"] = f"{message.get('content') or ''}\n\n{HINT_HEADER}\n{hint}"
            return out
    out.append({"role": "user", "content": f"{HINT_HEADER}\n{hint}"})
    return out


if __name__ == "__main__":
    tpl = ChatTemplate.from_gguf(Path(sys.argv[1]))
    msgs = [{"role": "user", "content": sys.argv[2]}]
    for where in ("user", "system"):
        print(f"--- {where}\n{tpl.render(teacher_messages(msgs, sys.argv[3], where))}")
