"""Tool outcomes: what a tool's output says of the call the answer made, by rules of its own.

When the next state of an answer is a ``tool`` message (an editor agent ran the call the
model wrote), it is not a person's reply and the reply judge does not score it. The rules here
do: an error the call caused (a traceback, an exception, a non-zero exit, "command not found",
"no such file", "permission denied", an HTTP 4xx/5xx status, a JSON result with an ``error``)
is -1; anything else abstains (0: no sample), because a result that looks fine says little
until the user's later reply builds on it. Kept apart from the reply scorer, so neither
dilutes the other; the vote is stored with kind ``tool`` and its raw text.

Run alone to score a tool output::

    python -m clawd.signals.toolresult 'Traceback (most recent call last): ...'
"""

from __future__ import annotations

import json
import re
import sys

_ERROR = re.compile(
    r"Traceback \(most recent call last\)|^\s*(?:\w+\.)*\w*(?:Error|Exception)\b[:(]"
    r"|^\s*(?:error|fatal|panic)\b[:\[]|\bexit(?:ed)? (?:with )?(?:code|status) [1-9]\d*"
    r"|\breturned non-zero exit\b|\bcommand not found\b|\bno such file or directory\b"
    r"|\bpermission denied\b|\bsegmentation fault\b|\bHTTP/\d(?:\.\d)? [45]\d\d\b"
    r'|"status(?:_code)?"\s*:\s*[45]\d\d\b',
    re.I | re.M,
)


def tool_outcome(output: str) -> int:
    """-1 when the tool's ``output`` reports an error the call caused, else 0 (abstain)."""
    text = output.strip()
    if not text:
        return 0
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("error") not in (None, "", False, [], {}):
        return -1
    if isinstance(data, dict) and data.get("ok") is False:
        return -1
    return -1 if _ERROR.search(text[:20000]) else 0


if __name__ == "__main__":
    print(tool_outcome(" ".join(sys.argv[1:]) or sys.stdin.read()))
