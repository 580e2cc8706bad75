"""Fast Downward's translations kept on disk, keyed by what they are a function of.

Most of loading an ALFWorld game is translating its PDDL problem to SAS (measured: about
0.6 of the 0.7 s a load takes; the grounding of every action). The translator is a pure
function of the domain, the problem, its options and its version (the same SAS text in
every process, whatever ``PYTHONHASHSEED``), and one game is loaded many times: by every
worker that runs one of its tasks, by ``cir estimate`` and then ``cir run`` on the same
tasks, by a resumed run, by a second agent on the same tasks, by the tests. So the SAS text
is kept in a cache folder, one gzipped JSON file per (domain, problem, options, version),
with the sha256 of the text: a file that does not hold what its name says is translated
again and rewritten (with a warning), never used. The normalised PDDL task the engine also
reads is cheap (parsing, no grounding) and always made fresh.

Where: ``$CIR_CACHE_DIR/sas`` if set, else ``$XDG_CACHE_HOME/cir/sas``, else
``~/.cache/cir/sas``; about 30 KB a game; deleting it costs only time. A folder that cannot
be written is one warning per process, and games are then translated as without a cache.
``Savings(sas_cache=False)`` (``cir.families.alfworld.engine``) does not use it at all.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import threading
from importlib.metadata import version
from pathlib import Path

from cir.util.errors import CirError
from cir.util.files import user_cache, write_bytes_atomic

log = logging.getLogger(__name__)

#: The layout of a cache file; a change makes every old file a miss.
FORMAT = 1
_TRANSLATOR = f"fast_downward_textworld {version('fast_downward_textworld')}"


def cache_dir() -> Path:
    """The folder of the SAS cache (module docstring)."""
    return user_cache("sas")


def translation_key(domain: str, problem: str, optimize: bool) -> str:
    """The sha256 of everything a translation is a function of."""
    h = hashlib.sha256()
    for part in (f"cir-sas {FORMAT}", _TRANSLATOR, f"optimize={optimize}", domain, problem):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


class SasCache:
    """SAS texts by :func:`translation_key`, in ``folder`` (default :func:`cache_dir`)."""

    def __init__(self, folder: str | Path | None = None) -> None:
        self.folder = Path(folder) if folder is not None else cache_dir()
        self._warned = False
        self._lock = threading.Lock()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json.gz"

    def get(self, domain: str, problem: str, optimize: bool) -> str | None:
        """The kept SAS text of this translation, or None (not kept, or not intact)."""
        key = translation_key(domain, problem, optimize)
        path = self._path(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as err:
            self._warn(f"{path}: cannot read ({err.strerror or type(err).__name__})")
            return None
        try:
            entry = json.loads(gzip.decompress(raw))
            sas = entry["sas"]
            intact = (entry["key"] == key and isinstance(sas, str)
                      and hashlib.sha256(sas.encode("utf-8")).hexdigest() == entry["sas_sha256"])
        except (OSError, EOFError, ValueError, KeyError, TypeError):
            intact = False
        if not intact:
            log.warning("%s: not an intact translation of its game; translating it again", path)
            return None
        return sas

    def put(self, domain: str, problem: str, optimize: bool, sas: str) -> None:
        """Keep ``sas`` (a folder that cannot be written is a warning, once)."""
        key = translation_key(domain, problem, optimize)
        path = self._path(key)
        entry = {"key": key, "format": FORMAT, "translator": _TRANSLATOR, "optimize": optimize,
                 "sas_sha256": hashlib.sha256(sas.encode("utf-8")).hexdigest(), "sas": sas}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(path, gzip.compress(json.dumps(entry).encode("utf-8"), compresslevel=1))
        except OSError as err:
            self._warn(f"{path.parent}: cannot write ({err.strerror or type(err).__name__})")
        except CirError as err:
            self._warn(str(err))

    def _warn(self, what: str) -> None:
        with self._lock:
            if self._warned:
                return
            self._warned = True
        log.warning("the SAS cache in %s: %s; games are translated without it (set CIR_CACHE_DIR "
                    "to a writable folder to keep their translations)", self.folder, what)
