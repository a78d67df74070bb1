"""A local HTTP server standing in for the model hub, for tests of the real download code.

It answers ``HEAD`` and ``GET`` on ``/<owner>/<repo>/resolve/<revision>/<filename>`` the way
the hub does for large files: ``X-Repo-Commit``, the sha256 as ``ETag``, ``Content-Length``
and ``Range`` requests. ``drop_after`` makes the first GET hang up after that many bytes, so
that resuming can be tested; ``corrupt`` serves bytes that do not match the advertised hash.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class FakeHub:
    files: dict[str, bytes]  # "owner/repo/filename" -> content
    drop_after: int | None = None
    corrupt: bool = False
    ranges: list[str] = field(default_factory=list)  # Range headers received
    gets: int = 0

    def lookup(self, path: str) -> tuple[bytes, str] | None:
        parts = path.lstrip("/").split("/")
        if len(parts) < 5 or parts[2] != "resolve":
            return None
        key = "/".join([parts[0], parts[1], *parts[4:]])
        if key not in self.files:
            return None
        data = self.files[key]
        return data, hashlib.sha256(data).hexdigest()


def serve(hub: FakeHub) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _headers(self, data: bytes, digest: str, start: int = 0) -> None:
            self.send_header("X-Repo-Commit", "0" * 40)
            self.send_header("ETag", f'"{digest}"')
            self.send_header("Content-Length", str(len(data) - start))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()

        def do_HEAD(self) -> None:
            found = hub.lookup(self.path)
            if not found:
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound")
                self.end_headers()
                return
            self.send_response(200)
            self._headers(*found)

        def do_GET(self) -> None:
            found = hub.lookup(self.path)
            if not found:
                self.send_response(404)
                self.end_headers()
                return
            data, digest = found
            hub.gets += 1
            start = 0
            if rng := self.headers.get("Range"):
                hub.ranges.append(rng)
                start = int(rng.split("=")[1].split("-")[0])
            self.send_response(206 if start else 200)
            self._headers(data, digest, start)
            body = data[start:]
            if hub.corrupt:
                body = bytes(b ^ 0xFF for b in body[:16]) + body[16:]
            if hub.drop_after is not None and hub.gets == 1:
                self.wfile.write(body[: hub.drop_after])
                self.wfile.flush()
                self.connection.close()
                return
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
