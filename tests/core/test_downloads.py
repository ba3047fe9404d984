"""Upstream downloads against a misbehaving loopback file server: resume with Range, servers without Range,
retries on 5xx/429 and dropped connections, HTTP errors kept apart from no network, Google Drive's form."""

import hashlib
import http.server
import threading

import pytest

from zoo.errors import DownloadError, IntegrityError, OfflineError
from zoo.hub import _download_url
from zoo.registry import FileSpec

DATA = bytes(range(256)) * 4096  # 1 MiB


class _Server(http.server.ThreadingHTTPServer):
    """Serves DATA at /file with scripted misbehaviour; logs each request's Range header."""

    def __init__(self):
        self.ranges = True  # honour Range requests
        self.drop_after: list[int] = []  # per request, in order: close the connection after this many bytes
        self.statuses: list[int] = []  # per request, in order: answer this status instead
        self.confirm = False  # answer the first GET of /file with Google Drive's "can't scan" form
        self.log: list[str | None] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                server.log.append(self.headers.get("Range"))
                if server.statuses:
                    status = server.statuses.pop(0)
                    self.send_response(status)
                    self.send_header("Retry-After", "1")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path.startswith("/file") and server.confirm and "confirm" not in self.path:
                    page = (b'<!DOCTYPE html><html><body><form id="download-form" action="/file/confirmed" method="get">'
                            b'<input type="hidden" name="id" value="abc"><input type="hidden" name="confirm" value="t">'
                            b'<input type="hidden" name="uuid" value="u-1"></form></body></html>')
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                    return
                start = 0
                rng = self.headers.get("Range")
                if rng and server.ranges:
                    start = int(rng.split("=")[1].split("-")[0])
                body = DATA[start:]
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(DATA) - 1}/{len(DATA)}")
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                cut = server.drop_after.pop(0) if server.drop_after else None
                self.wfile.write(body if cut is None else body[:cut])
                if cut is not None:
                    self.close_connection = True

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/file"


@pytest.fixture
def server(monkeypatch):
    pauses = []
    monkeypatch.setattr("time.sleep", pauses.append)
    s = _Server()
    s.pauses = pauses
    threading.Thread(target=s.serve_forever, daemon=True).start()
    yield s
    s.shutdown()


SPEC = FileSpec("official.pth", hashlib.sha256(DATA).hexdigest(), len(DATA), url="unused")


def test_dropped_connection_resumes_with_range(server, tmp_path):
    server.drop_after = [300_000, 200_000]
    _download_url(server.url, tmp_path / "official.pth", SPEC)
    assert (tmp_path / "official.pth").read_bytes() == DATA
    assert server.log == [None, "bytes=300000-", "bytes=500000-"]  # each retry asked only for what was missing
    assert server.pauses == [1, 2]


def test_server_without_range_support_starts_over(server, tmp_path):
    server.ranges = False
    server.drop_after = [300_000]
    _download_url(server.url, tmp_path / "official.pth", SPEC)
    assert (tmp_path / "official.pth").read_bytes() == DATA  # a 200 to a Range request: the partial was replaced
    assert server.log == [None, "bytes=300000-"]


def test_server_errors_are_retried_with_backoff(server, tmp_path):
    server.statuses = [503, 429, 500]
    _download_url(server.url, tmp_path / "official.pth", SPEC)
    assert (tmp_path / "official.pth").read_bytes() == DATA
    assert server.pauses == [1, 1, 1]  # the server's Retry-After


@pytest.mark.parametrize("status, words", [(404, "not found"), (403, "access denied")])
def test_http_errors_are_not_no_network(server, tmp_path, status, words):
    server.statuses = [status]
    with pytest.raises(DownloadError, match=f"HTTP {status}.*{words}.*place a copy you downloaded yourself at"):
        _download_url(server.url, tmp_path / "official.pth", SPEC)
    assert server.pauses == [] and not (tmp_path / "official.pth").exists()


def test_no_network_names_the_manual_path(tmp_path, monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    with pytest.raises(OfflineError, match=f"failed after 5 tries.*{tmp_path / 'official.pth'}"):
        _download_url("http://127.0.0.1:9/file", tmp_path / "official.pth", SPEC)


def test_google_drive_confirmation_form_is_followed(server, tmp_path):
    server.confirm = True
    _download_url(server.url, tmp_path / "official.pth", SPEC)
    assert (tmp_path / "official.pth").read_bytes() == DATA


def test_wrong_bytes_are_never_kept(server, tmp_path):
    bad = FileSpec("official.pth", "0" * 64, len(DATA), url="unused")
    with pytest.raises(IntegrityError, match="nothing was kept"):
        _download_url(server.url, tmp_path / "official.pth", bad)
    assert list(tmp_path.iterdir()) == []
