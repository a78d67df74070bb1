"""What the hinted model can teach: the base model's answers with the user's rule in context.

Distillation (the OPD term) moves the student toward what the same
model writes with the hint in its context, and the RL term toward what the student's own sampled
answers already get right. A preference that neither shows leaves the learner little to move
toward, however it trains. This measures both on the served model (llama.cpp, the learning
bench's evaluation, on its tuning prompts: this decides what to try; at most 96 tokens):

- plain: the base model's greedy answer, and ``--samples`` sampled ones (what RL can find);
- hinted: the greedy answer with the persona's rules as the oracle hint, placed in the last user
  message (``teacher_messages``, the default) and as a system message, and ``--samples`` sampled
  with the user placement.

For each persona it prints the mean compliance (the share of its preferences met) and the share
of prompts where some sampled answer meets every preference. Plain answers do not depend on the
persona, so they are generated once per prompt and scored against each. Run alone::

    python -m bench.teacher                              # 6 personas, the 20 tuning prompts
    python -m bench.teacher --personas sam,curious --samples 8 --out bench/results/teacher.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from bench.personas import PERSONAS, TUNING_PROMPTS, Persona
from clawd.chattemplate import teacher_messages
from clawd.config import load_settings
from clawd.models import resolve
from clawd.serving.engine import Engine, GenParams, Result, generate_blocking

MAX_TOKENS = 96  # as bench.learning's evaluation


def answers(
    engine: Engine, prompt: list[int], samples: int, temperature: float, seed: int
) -> list[Result]:
    """The greedy answer to ``prompt``, then ``samples`` sampled ones (seeds seed, seed+1, ...)."""
    params = [GenParams(temperature=0, max_tokens=MAX_TOKENS)] + [
        GenParams(temperature=temperature, top_p=0.95, max_tokens=MAX_TOKENS, seed=seed + i)
        for i in range(samples)
    ]
    return [generate_blocking(engine, prompt, p) for p in params]


def score(
    persona: Persona,
    greedy: list[str],
    sampled: list[list[str]],
) -> dict:
    """Mean compliance of the greedy answers and of every sampled one, and the share of prompts
    with a sampled answer that meets every preference."""
    flat = [persona.compliance(a) for row in sampled for a in row]
    meets = [[persona.compliance(a) == 1.0 for a in row] for row in sampled]
    return {
        "greedy": statistics.fmean(persona.compliance(a) for a in greedy),
        "sampled": statistics.fmean(flat) if flat else None,
        "some_sample_meets_all": statistics.fmean(any(row) for row in meets) if flat else None,
    }


def measure(
    engine: Engine,
    personas: list[str],
    prompts: tuple[str, ...],
    samples: int,
    temperature: float,
    seed: int,
) -> list[dict]:
    def tokens(messages: list[dict]) -> list[int]:
        return engine.tokenize(engine.render(messages))

    plain = []
    for q in prompts:
        got = answers(engine, tokens([{"role": "user", "content": q}]), samples, temperature, seed)
        plain.append([r.content for r in got])
    rows = []
    for name in personas:
        persona = PERSONAS[name]
        hint = " ".join(p.rule for p in persona.preferences)
        t0 = time.monotonic()
        user, system = [], []
        for q in prompts:
            msgs = [{"role": "user", "content": q}]
            got = answers(
                engine, tokens(teacher_messages(msgs, hint, "user")), samples, temperature, seed
            )
            user.append([r.content for r in got])
            (greedy,) = answers(engine, tokens(teacher_messages(msgs, hint, "system")), 0, 0, seed)
            system.append(greedy.content)
        row = {
            "persona": name,
            "hint": hint,
            "plain": score(persona, [a[0] for a in plain], [a[1:] for a in plain]),
            "hinted_user": score(persona, [a[0] for a in user], [a[1:] for a in user]),
            "hinted_system": score(persona, system, []),
            "examples": {
                "plain": plain[0][0],
                "hinted_user": user[0][0],
                "hinted_system": system[0],
            },
            "seconds": round(time.monotonic() - t0, 1),
        }
        rows.append(row)
        print(table_line(row), flush=True)
    return rows


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table_line(row: dict) -> str:
    p, u, s = row["plain"], row["hinted_user"], row["hinted_system"]
    cells = [
        row["persona"],
        _cell(p["greedy"]),
        _cell(p["sampled"]),
        _cell(p["some_sample_meets_all"]),
        _cell(u["greedy"]),
        _cell(s["greedy"]),
        _cell(u["sampled"]),
        _cell(u["some_sample_meets_all"]),
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| persona | plain greedy | plain sampled | plain: some sample meets all "
    "| hinted greedy (user) | hinted greedy (system) | hinted sampled "
    "| hinted: some sample meets all |\n"
    "|---|---|---|---|---|---|---|---|"
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--personas", default=",".join(PERSONAS), help="comma-separated (default: all)")
    ap.add_argument("--prompts", type=int, default=12, help="tuning prompts used")
    ap.add_argument("--samples", type=int, default=4, help="sampled answers per prompt and context")
    ap.add_argument(
        "--temperature", type=float, default=0.8, help="as the learning bench's users see"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--model", default=None, help="a GGUF path or model name (default: the setting)"
    )
    ap.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    personas = [p for p in args.personas.split(",") if p]
    unknown = [p for p in personas if p not in PERSONAS]
    if unknown:
        ap.error(f"--personas: unknown {unknown}; known: {', '.join(PERSONAS)}")
    if not 1 <= args.prompts <= len(TUNING_PROMPTS):
        ap.error(f"--prompts must be 1..{len(TUNING_PROMPTS)}")
    if args.samples < 0:
        ap.error("--samples must be >= 0")
    settings = load_settings()
    model = resolve(args.model or settings.model)
    engine = Engine(model, n_ctx=settings.n_ctx, n_threads=settings.n_threads)
    engine.load()
    t0 = time.monotonic()
    print(f"model {model.name}, {args.prompts} tuning prompts, {args.samples} samples each")
    print(HEADER, flush=True)
    try:
        rows = measure(
            engine,
            personas,
            TUNING_PROMPTS[: args.prompts],
            args.samples,
            args.temperature,
            args.seed,
        )
    finally:
        engine.close()
    print(f"{time.monotonic() - t0:.0f} s")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        meta = {"model": model.name, "prompts": args.prompts, "samples": args.samples}
        args.out.write_text(
            json.dumps({**meta, "temperature": args.temperature, "rows": rows}, indent=1)
        )
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
