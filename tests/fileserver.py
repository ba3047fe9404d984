"""A loopback HTTP file server for the zoo's upstream downloads (``zoo._download._download_url``), with scripted
misbehaviour. Tests get one from the ``file_server`` fixture of tests/conftest.py."""

import http.server
from urllib.parse import urlsplit

# Google Drive's "can't scan this file for viruses" page: a form whose submission serves the file
_CONFIRM_PAGE = (b'<!DOCTYPE html><html><body><form id="download-form" action="{path}" method="get">'
                 b'<input type="hidden" name="id" value="abc"><input type="hidden" name="confirm" value="t">'
                 b'<input type="hidden" name="uuid" value="u-1"></form></body></html>')


class FileServer(http.server.ThreadingHTTPServer):
    """Serves ``files`` (URL path -> bytes) on 127.0.0.1; logs each request's path in ``hits`` and its Range header
    in ``ranges``. A body starting ``<!DOCTYPE`` is served as text/html.

    Misbehaviour: ``statuses`` (per request, in order: answer this status instead, with Retry-After 1),
    ``drop_after`` (per request, in order: close the connection after this many body bytes), ``ranges_honoured``
    (False: answer a Range request with the whole file) and ``confirm`` (answer with Google Drive's form first).
    """

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.statuses: list[int] = []
        self.drop_after: list[int] = []
        self.ranges_honoured = True
        self.confirm = False
        self.hits: list[str] = []
        self.ranges: list[str | None] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FileServer

    def log_message(self, *args):  # keep test output clean
        pass

    def _answer(self, status: int, body: bytes, headers: dict, *, cut: int | None = None) -> None:
        self.send_response(status)
        for key, value in {**headers, "Content-Length": len(body)}.items():
            self.send_header(key, str(value))
        self.end_headers()
        self.wfile.write(body[:cut])
        if cut is not None:
            self.close_connection = True

    def do_GET(self):
        server, url = self.server, urlsplit(self.path)
        server.hits.append(url.path)
        server.ranges.append(self.headers.get("Range"))
        body = server.files.get(url.path)
        if server.statuses:
            self._answer(server.statuses.pop(0), b"", {"Retry-After": 1})
        elif server.confirm and "confirm=" not in url.query:
            page = _CONFIRM_PAGE.replace(b"{path}", url.path.encode())
            self._answer(200, page, {"Content-Type": "text/html; charset=utf-8"})
        elif body is None:
            self.send_error(404)
        else:
            size, start = len(body), 0
            if self.headers.get("Range") and server.ranges_honoured:
                start = int(self.headers["Range"].split("=")[1].split("-")[0])
            headers = {"Content-Type": "text/html" if body.startswith(b"<!DOCTYPE") else "application/octet-stream"}
            if start:
                headers["Content-Range"] = f"bytes {start}-{size - 1}/{size}"
            self._answer(206 if start else 200, body[start:], headers,
                         cut=server.drop_after.pop(0) if server.drop_after else None)
