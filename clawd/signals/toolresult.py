"""Tool outcomes: what a tool's output says of the call the answer made, by rules of its own.

When the next state of an answer is a ``tool`` message (an editor agent ran the call the
model wrote), it is not a person's reply and the reply judge does not score it. The rules here
do: an error the call caused (a stack trace or uncaught exception, a compiler, linter or test
failure, a non-zero exit, "command not found", "no such file", "permission denied", an HTTP
4xx/5xx status or error page, a JSON result whose ``error`` holds something) is -1; anything
else abstains (0: no sample), because a result that looks fine says little
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
    # stack traces and uncaught exceptions, in the shapes common runtimes print
    r"Traceback \(most recent call last\)|^\s*(?:\w+\.)*\w*(?:Error|Exception)\b[:(]"
    r"|Exception in thread|\bUncaught\b|\bStack trace:|^\s*\*\* \(\w+Error\)|\(\w+Error\)\s*$"
    r"|\bpanicked at\b|^\s*(?:error|fatal|panic)\b[:\[]"
    # compilers, linters, type checkers: "file:line:col: error", "error TS2322", "error CS0103"
    r"|:\d+(?::\d+)?:?\s+error\b|\)\s*:\s*error\b|\berror [A-Z]{1,4}\d{3,5}\b|^\s*\d+:\d+\s+error\b"
    r"|\bFound \d+ errors? in\b|\bBuild FAILED\b|\b[1-9]\d* (?:failed|errors?)\b(?! ?=)"
    # test runners
    r"|^\s*(?:FAIL|FAILED)\b|^--- FAIL\b|^=+ .*\bfailed\b|\b[.sxE]*F[.sxFE]*\s+\[\s*\d+%\]"
    # shells, package managers, version control, containers
    r"|\bexit(?:ed)? (?:with )?(?:code|status) [1-9]\d*|\breturned non-zero exit\b"
    r"|\bcommand not found\b|\bis not recognized as an internal or external command\b"
    r"|\bno such file or directory\b|\bcannot find (?:path|file|module)\b|\bdoes not exist\b"
    r"|\bpermission denied\b|\baccess denied\b|\bsegmentation fault\b|\bnpm ERR!"
    r"|^CONFLICT \(|\bAutomatic merge failed\b|\bError response from daemon\b"
    r"|\bError from server\b|\bParse error\b|\bsyntax error\b|^ERROR \d+\b|^ERROR\b:?"
    r"|\bcould not resolve host\b|\bconnection (?:refused|reset|timed out)\b"
    r"|\btimed out after\b|\bnot found in\b|\b0 occurrences\b|\bundefined (?:method|function)\b"
    r"|[│|]\s*Error:"
    # HTTP: a status line, a JSON status or an HTML error page
    r"|\bHTTP/\d(?:\.\d)? [45]\d\d\b|^status:\s*[45]\d\d\b"
    r'|"(?:status|status_code|code|cod)"\s*:\s*"?[45]\d\d\b|<title>\s*[45]\d\d\b'
    r'|"detail"\s*:\s*"(?:not |un)\w+',
    re.I | re.M,
)
# JSON keys that carry a failure when they hold something
_ERROR_KEYS = ("error", "errors", "exception", "fault")


def tool_outcome(output: str) -> int:
    """-1 when the tool's ``output`` reports an error the call caused, else 0 (abstain)."""
    text = output.strip()
    if not text:
        return 0
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        if any(data.get(k) not in (None, "", False, [], {}, 0) for k in _ERROR_KEYS):
            return -1
        if data.get("ok") is False or data.get("success") is False:
            return -1
    return -1 if _ERROR.search(text[:20000]) else 0


if __name__ == "__main__":
    print(tool_outcome(" ".join(sys.argv[1:]) or sys.stdin.read()))
