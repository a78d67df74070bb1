"""An external judge: any OpenAI-compatible chat endpoint votes instead of the local model.

Set ``judge_url`` (for example ``http://127.0.0.1:11434/v1`` for Ollama, a llama-server, a
hosted API, or another clawd daemon), ``judge_api_key`` and ``judge_model_name``. The judge
sends the same prompts as the local written judge (``clawd.signals.rules``) and parses the
same ``\\boxed{}`` scores; a reply without one abstains. Each call has a timeout
(``judge_timeout_s``); connection errors, timeouts, 429 and 5xx answers are retried with
exponential backoff, then raise ``JudgeError`` so that the signal job records the failure and
tries the turn again later. A 4xx other than 429 is not retried: the settings are wrong.

Run alone to judge one exchange with the configured endpoint::

    python -m clawd.signals.external "Capital of France?" "Paris." "thanks!"
"""

from __future__ import annotations

import sys
import time
from typing import Any

import httpx

from clawd.config import Settings
from clawd.signals.judge import JudgeError
from clawd.signals.rules import Exchange, hint_messages, judge_messages, parse_boxed

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


def chat_url(base: str) -> str:
    """The chat completions URL of an endpoint given as its base (``.../v1``) or in full."""
    base = base.strip().rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    return base + "/chat/completions"


class ExternalJudge:
    """Votes and hints from an OpenAI-compatible endpoint (same interface as ``Judge``)."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str = "",
        model_name: str = "",
        timeout_s: float = 60.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        max_tokens: int = 96,
    ) -> None:
        self.url = chat_url(url)
        self.model_name = model_name or "default"
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self.max_tokens = max_tokens
        headers = {"Content-Type": "application/json", "X-Clawd-Learn": "0"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._headers = headers
        self._http: httpx.Client | None = None

    @classmethod
    def from_settings(cls, s: Settings) -> ExternalJudge:
        """The endpoint the settings name (``judge_url`` and its companions)."""
        return cls(
            s.judge_url,
            api_key=s.judge_api_key,
            model_name=s.judge_model_name,
            timeout_s=s.judge_timeout_s,
            max_tokens=s.judge_max_tokens,
        )

    @property
    def name(self) -> str:
        """What the signals record as their judge: the model name at the endpoint."""
        return f"{self.model_name} @ {self.url}"

    def load(self) -> None:
        if self._http is None:
            self._http = httpx.Client(timeout=self.timeout_s, headers=self._headers)

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def _chat(self, messages: list[dict[str, str]], *, temperature: float, seed: int) -> str:
        self.load()
        assert self._http is not None
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": messages,
            "temperature": temperature,
            "seed": seed,
            "max_tokens": self.max_tokens,
            "stream": False,
        }
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                resp = self._http.post(self.url, json=body)
            except httpx.HTTPError as exc:  # refused, reset, timed out
                problem = f"{type(exc).__name__}: {exc}"
                continue
            if resp.status_code in RETRY_STATUS:
                problem = f"HTTP {resp.status_code}: {resp.text[:200]}"
                continue
            if resp.status_code >= 400:
                raise JudgeError(
                    f"the judge at {self.url} refused the request (HTTP {resp.status_code}): "
                    f"{resp.text[:300]}"
                )
            try:
                message = resp.json()["choices"][0]["message"]
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise JudgeError(
                    f"the judge at {self.url} did not answer like an OpenAI chat endpoint: "
                    f"{resp.text[:300]}"
                ) from exc
            return str(message.get("content") or "")
        raise JudgeError(
            f"the judge at {self.url} did not answer after {self.retries + 1} tries: {problem}"
        )

    def vote(self, ex: Exchange, *, temperature: float, seed: int) -> str:
        """One evaluative vote's raw text; ``parse_boxed`` reads its score (None: abstains)."""
        return self._chat(judge_messages(ex), temperature=temperature, seed=seed)

    def hint(self, ex: Exchange, *, temperature: float, seed: int) -> str:
        """One hint-extractor output (``parse_hint`` reads it)."""
        return self._chat(hint_messages(ex), temperature=temperature, seed=seed)


if __name__ == "__main__":
    from clawd.config import load_settings

    s = load_settings()
    if not s.judge_url:
        raise SystemExit("judge_url is not set (see `clawd config show`)")
    judge = ExternalJudge.from_settings(s)
    raw = judge.vote(Exchange(*sys.argv[1:4]), temperature=s.judge_temperature, seed=0)
    print(f"score {parse_boxed(raw)}\n{raw}")
