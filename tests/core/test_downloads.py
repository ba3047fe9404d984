"""Upstream downloads against a misbehaving loopback file server: resume with Range, servers without Range,
retries on 5xx/429 and dropped connections, HTTP errors kept apart from no network, Google Drive's form."""

import hashlib

import pytest

from zoo.errors import DownloadError
from zoo._download import _download_url
from zoo.registry import FileSpec

DATA = bytes(range(256)) * 4096  # 1 MiB


@pytest.fixture
def server(file_server):
    file_server.files["/file"] = DATA
    file_server.file_url = f"{file_server.url}/file"
    return file_server


SPEC = FileSpec("official.pth", hashlib.sha256(DATA).hexdigest(), len(DATA), url="unused")


def test_dropped_connection_resumes_with_range(server, tmp_path):
    server.drop_after = [300_000, 200_000]
    _download_url(server.file_url, tmp_path / "official.pth", SPEC)
    assert (tmp_path / "official.pth").read_bytes() == DATA
    assert server.ranges == [None, "bytes=300000-", "bytes=500000-"]  # each retry asked only for what was missing
    assert server.pauses == [1, 2]


def test_server_without_range_support_starts_over(server, tmp_path):
    server.ranges_honoured = False
    server.drop_after = [300_000]
    _download_url(server.file_url, tmp_path / "official.pth", SPEC)
    assert (tmp_path / "official.pth").read_bytes() == DATA  # a 200 to a Range request: the partial was replaced
    assert server.ranges == [None, "bytes=300000-"]


def test_server_errors_are_retried_with_backoff(server, tmp_path):
    server.statuses = [503, 429, 500]
    _download_url(server.file_url, tmp_path / "official.pth", SPEC)
    assert (tmp_path / "official.pth").read_bytes() == DATA
    assert server.pauses == [1, 1, 1]  # the server's Retry-After


@pytest.mark.parametrize("status, words", [(404, "not found"), (403, "access denied")])
def test_http_errors_are_not_no_network(server, tmp_path, status, words):
    server.statuses = [status]
    with pytest.raises(DownloadError, match=f"HTTP {status}.*{words}.*place a copy you downloaded yourself at"):
        _download_url(server.file_url, tmp_path / "official.pth", SPEC)
    assert server.pauses == [] and not (tmp_path / "official.pth").exists()


def test_google_drive_confirmation_form_is_followed(server, tmp_path):
    server.confirm = True
    _download_url(server.file_url, tmp_path / "official.pth", SPEC)
    assert (tmp_path / "official.pth").read_bytes() == DATA

