"""The authors' official files of an entry not released yet, on local disk and converted once.

A file hosted on the Hub (``hf://`` url) comes through the HF cache; any other is downloaded into
``$ZOO_HOME/downloads`` (see :func:`_download_url`). A file whose hash the catalog lacks is pinned by its first
download (trust on first use, in ``$ZOO_HOME/pins``). The converter's output is kept under ``$ZOO_HOME/converted``,
keyed by the pins of its inputs.
"""

from __future__ import annotations

import contextlib
import hashlib
import html.parser
import http.client
import json
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import replace
from pathlib import Path

from zoo._hub_errors import RETRY_STATUS, offline_error
from zoo._hub_files import Done, Fail, NotCached, Retry, Verdict, cached, download_checked, in_hf_cache
from zoo._hub_files import unreachable_hub
from zoo._verify import file_pin, matches, matches_server_claim, remember, verify_file
from zoo.errors import DownloadError, IntegrityError, OfflineError
from zoo.io import check_space, folder_undone_on_failure, sha256_file, storage_errors, write_json_atomic
from zoo.registry import FileSpec, ModelEntry, import_object
from zoo.settings import OFFLINE_REASON, downloads_dir, is_offline, zoo_home

DOWNLOAD_RETRIES = 4  # after the first try, with backoff 1, 2, 4, 8 s


class _FormFinder(html.parser.HTMLParser):
    """The download form of Google Drive's "can't scan this file for viruses" page: its action and hidden fields."""

    def __init__(self):
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}
        self._in_form = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and self.action is None and attrs.get("action"):
            self.action, self._in_form = attrs["action"], True
        elif tag == "input" and self._in_form and attrs.get("name"):
            self.fields[attrs["name"]] = attrs.get("value") or ""

    def handle_endtag(self, tag):
        if tag == "form":
            self._in_form = False


def _confirmation_url(page: bytes, url: str) -> str | None:
    finder = _FormFinder()
    finder.feed(page.decode("utf-8", "replace"))
    if not finder.action or "id" not in finder.fields:
        return None
    action = urllib.parse.urljoin(url, finder.action)
    return f"{action}?{urllib.parse.urlencode(finder.fields)}"


def _retry_pause(attempt: int, retry_after: str | None) -> float:
    if retry_after and retry_after.strip().isdigit():
        return min(float(retry_after), 60.0)
    return float(2**attempt)


def _download_url(url: str, dest: Path, spec: FileSpec) -> None:
    """Download ``url`` to ``dest``: resumes a partial ``.part`` with HTTP Range, retries connection errors and
    5xx/429 with backoff, follows Google Drive's confirmation form, checks the sha256 before ``dest`` appears. A
    file of known size that cannot fit is refused before its first byte."""
    from tqdm.auto import tqdm

    from zoo import __version__

    part = dest.with_name(dest.name + ".part")
    if spec.size:
        check_space(dest.parent, spec.size - (part.stat().st_size if part.exists() else 0), f"downloading {spec.path}")
    with storage_errors(dest.parent):
        dest.parent.mkdir(parents=True, exist_ok=True)
    manual = f"or place a copy you downloaded yourself at {dest}"
    attempt, confirmations = 0, 0
    while True:
        have = part.stat().st_size if part.exists() else 0
        headers = {"User-Agent": f"zoo/{__version__}"}
        if have:
            headers["Range"] = f"bytes={have}-"
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
                if response.headers.get_content_type() == "text/html":
                    page = response.read(1 << 20)
                    confirmed = _confirmation_url(page, url) if confirmations < 2 else None
                    if confirmed is None:
                        raise DownloadError(f"{url} answered with an HTML page, not the file {spec.path}; the link "
                                            f"may have changed: fetch the file in a browser, {manual}")
                    url, confirmations = confirmed, confirmations + 1
                    continue
                resumed = have and response.status == 206
                if resumed and not (response.headers.get("Content-Range") or "").startswith(f"bytes {have}-"):
                    resumed = False  # not the range asked for: start over
                remaining = int(response.headers.get("Content-Length") or 0) or None
                total = remaining + have if resumed and remaining else remaining
                with storage_errors(part), open(part, "ab" if resumed else "wb") as out, tqdm(
                    total=total, initial=have if resumed else 0, unit="B", unit_scale=True, desc=Path(spec.path).name
                ) as bar:
                    while block := response.read(1 << 20):
                        out.write(block)
                        bar.update(len(block))
                if total is not None and part.stat().st_size < total:
                    raise ConnectionError(f"the connection closed after {part.stat().st_size} of {total} bytes")
            break
        except urllib.error.HTTPError as err:
            if err.code == 416 and have:  # the partial file is not a prefix the server knows: start over
                part.unlink(missing_ok=True)
                continue
            if err.code not in RETRY_STATUS or attempt == DOWNLOAD_RETRIES:
                denied = " (access denied: the link may need a sign-in)" if err.code in (401, 403) else ""
                moved = " (not found: the link may have moved)" if err.code == 404 else ""
                raise DownloadError(f"{url} answered HTTP {err.code} {err.reason} for {spec.path}{denied}{moved}; "
                                    f"{manual}") from None
            retry_after = err.headers.get("Retry-After")
        except (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException) as err:
            if attempt == DOWNLOAD_RETRIES:
                kept = f"; the {part.stat().st_size} bytes received are kept in {part} and resume next time" \
                    if part.exists() and part.stat().st_size else ""
                raise OfflineError(f"download of {url} failed after {attempt + 1} tries "
                                   f"({getattr(err, 'reason', err)}){kept}; {manual}") from None
            retry_after = None
        time.sleep(_retry_pause(attempt, retry_after))
        attempt += 1
    actual = sha256_file(part)
    if spec.sha256 and actual != spec.sha256:
        part.unlink()
        raise IntegrityError(f"{spec.path} from {url}: expected sha256 {spec.sha256}, got {actual}; nothing was kept")
    os.replace(part, dest)
    remember(dest, actual)  # the check that follows, and a pin on first use, hash nothing again


def _parse_hf_url(url: str) -> tuple[str, str, str]:
    """``hf://owner/name[@revision]/path`` -> (repo id, revision or ``main``, path)."""
    owner, name_at, path = url[len("hf://"):].split("/", 2)
    name, _, revision = name_at.partition("@")
    return f"{owner}/{name}", revision or "main", path


def upstream_on_disk(entry: ModelEntry) -> bool:
    """Whether every official file of ``entry`` is on this machine already (no network call)."""
    return all(in_hf_cache(*_parse_hf_url(spec.url)) if spec.url.startswith("hf://")
               else (downloads_dir(entry.name) / spec.path).exists() for spec in entry.upstream)


def _fetch_hf_upstream(entry: ModelEntry, spec: FileSpec) -> Path:
    """An official file hosted on the Hub: through the HF cache, checked against the Hub's LFS sha256."""
    repo_id, revision, path = _parse_hf_url(spec.url)
    spec = _recorded_pin(entry, spec)
    if spec.sha256:  # pinned and cached: no network call
        with contextlib.suppress(NotCached):
            return cached(repo_id, path, revision, spec)

    def check(local: Path) -> Verdict:
        if (spec.sha256 and matches(local, spec)) or (not spec.sha256 and matches_server_claim(local)):
            return Done()
        if spec.sha256 is None and len(Path(os.path.realpath(local)).name) not in (40, 64):
            return Fail(IntegrityError(f"{spec.url}: the server sent no hash for {path}, so it cannot be verified; "
                                       "download it from the Hub itself"))
        return Retry(IntegrityError(
            f"{spec.url}: the downloaded bytes do not match "
            f"{'the pinned sha256 ' + spec.sha256 if spec.sha256 else 'the hash the Hub announced'}, "
            "twice in a row; nothing was kept"))

    if (unreachable := unreachable_hub()) is not None:
        try:  # the HF cache may hold the file still, from before its pin was recorded in ZOO_HOME
            return download_checked(repo_id, path, revision, check, local_only=True)
        except OfflineError:
            raise OfflineError(unreachable) from None
    return download_checked(repo_id, path, revision, check)


def _recorded_pin(entry: ModelEntry, spec: FileSpec, downloaded: Path | None = None) -> FileSpec:
    """``spec``, with the sha256 and size recorded on first download when the catalog has none. Upstream files whose
    hash was never measured are pinned from their ``downloaded`` copy (trust on first use)."""
    if spec.sha256:
        return spec
    pin_file = zoo_home() / "pins" / f"{entry.name}.json"
    pins = json.loads(pin_file.read_text()) if pin_file.exists() else {}
    if spec.path not in pins and downloaded is not None:
        pins[spec.path] = file_pin(downloaded)
        write_json_atomic(pin_file, pins)
    return replace(spec, **pins[spec.path]) if spec.path in pins else spec


def fetch_upstream(entry: ModelEntry) -> Path:
    """The official files of ``entry``, each verified, converted into a zoo repo folder (once per set of pins)."""
    files: dict[str, Path] = {}
    pinned: dict[str, str] = {}
    for spec in entry.upstream:
        if spec.url.startswith("hf://"):
            try:
                local = _fetch_hf_upstream(entry, spec)
            except OfflineError as err:
                raise offline_error(entry, str(err)) from None
        else:
            local = downloads_dir(entry.name) / spec.path
            if not local.exists():
                if is_offline():
                    raise offline_error(entry, OFFLINE_REASON)
                _download_url(spec.url, local, spec)
        spec = _recorded_pin(entry, spec, local)
        verify_file(local, spec, delete_bad=True)
        files[spec.path] = local
        pinned[spec.path] = spec.sha256
    digest = hashlib.sha256(json.dumps(pinned, sort_keys=True).encode()).hexdigest()[:16]
    out = zoo_home() / "converted" / entry.name / digest
    if not out.exists():
        with folder_undone_on_failure(out.parent):
            tmp = Path(tempfile.mkdtemp(prefix=f".{digest}.", dir=out.parent))
            try:
                import_object(entry.converter)(files, tmp, entry)
                os.replace(tmp, out)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return out
