"""JSON and file I/O, the ground floor: the one strict JSON parser, checked reads, atomic writes and
the one JSON encoder of the library (used by the cache, the records, the scenarios and the claims).
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

from .validation import ValidationError


#: limits of every JSON document the project reads from a user, a cache or a record
#: (:func:`loads_json`): nesting depth, and size of a file (checked before it is read)
MAX_JSON_DEPTH = 64
MAX_JSON_BYTES = 256 * 2**20
#: values one document may hold (counted as its ',', '[' and '{' before it is parsed: an upper bound, a comma in
#: a string counts too). At the parse's peak a counted value costs up to about 110 bytes (measured with
#: tracemalloc: 81 for a small integer, 105 for a float, 145 for an empty object, which counts twice), so this caps
#: the parse at about 2 GB; a 256 MiB file of one-character values would otherwise take about 10 GB. A valid
#: scenario of 100,000 users with 64-value acceptance profiles holds about 7,000,000.
MAX_JSON_VALUES = 20_000_000


class _NonFinite(str):
    """A ``NaN``/``Infinity``, an overflowing number or an integer beyond the float range, as parsed,
    to be refused with its field's name."""


#: integers beyond this magnitude are refused (every field of our formats is a float or a count
#: far below it; a float conversion of a larger integer overflows)
MAX_JSON_INT = 2**1023


def loads_json(text: str, what: str, *, allow_nonfinite: bool = False) -> Any:
    """The one strict JSON parser of the project: ``json.loads(text)``, refusing with one
    :class:`ValidationError` naming ``what``: text that is not JSON, a key repeated in one object
    (plain ``json`` keeps the last one silently), ``NaN``/``Infinity``, numbers that overflow a
    float (``1e400``) and integers beyond :data:`MAX_JSON_INT` (the message names the field),
    integers beyond Python's integer-string limit, nesting deeper than :data:`MAX_JSON_DEPTH`, and more values
    than :data:`MAX_JSON_VALUES` (counted before parsing: memory, not only bytes, is bounded).
    Integers stay Python ints (their ranges are checked by the caller before any float conversion).

    ``allow_nonfinite``: ``NaN``/``Infinity`` are read as floats (only for records the project
    wrote itself and hashes, such as cache entries, where an undefined statistic is a NaN).
    """
    def pairs(items):
        out = {}
        for k, v in items:
            if k in out:
                raise ValidationError(f"{what}: key {k!r} appears twice in one object")
            out[k] = v
        return out

    def real(text_):
        v = float(text_)
        return v if math.isfinite(v) or allow_nonfinite else _NonFinite(text_[:40])

    def integer(text_):
        v = int(text_)
        return v if abs(v) <= MAX_JSON_INT else _NonFinite(f"an integer of {len(text_)} digits")

    constant = (lambda name: float(name)) if allow_nonfinite else _NonFinite
    if isinstance(text, (str, bytes)) and len(text) > MAX_JSON_VALUES:  # short texts cannot hold more values
        sep = (",", "[", "{") if isinstance(text, str) else (b",", b"[", b"{")
        values = sum(text.count(c) for c in sep)
        if values > MAX_JSON_VALUES:
            raise ValidationError(f"{what} holds about {values:,} JSON values, past the limit of {MAX_JSON_VALUES:,} "
                                  f"(memory grows with values, up to about 110 bytes each parsed); split or shrink it")
    try:
        doc = json.loads(text, object_pairs_hook=pairs, parse_constant=constant, parse_float=real,
                         parse_int=integer)
    except RecursionError:
        raise ValidationError(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValidationError:
        raise
    except ValueError as e:  # JSONDecodeError, or a number beyond Python's integer-string limit
        raise ValidationError(f"{what} is not valid JSON: {str(e).splitlines()[0]}") from None
    stack = [(doc, 1, "<document>")]
    while stack:
        x, depth, field_ = stack.pop()
        if type(x) is _NonFinite:
            raise ValidationError(f"{what}: field {field_!r} must be a finite number, got {str(x)}")
        if isinstance(x, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise ValidationError(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels")
            items = x.items() if isinstance(x, dict) else ((field_, v) for v in x)
            stack.extend((v, depth + 1, k) for k, v in items)
    return doc


def read_text_checked(path: str | Path, what: str, max_bytes: int | None = None) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes`` bytes (default :data:`MAX_JSON_BYTES`);
    one :class:`ValidationError` naming ``what`` otherwise (unreadable, not a regular file, too large,
    not UTF-8)."""
    path = Path(path)
    max_bytes = MAX_JSON_BYTES if max_bytes is None else max_bytes
    try:
        st = path.stat()
        if not path.is_file():
            raise ValidationError(f"{what} file {path} is not a regular file")
        if st.st_size > max_bytes:
            raise ValidationError(f"{what} file {path} has {st.st_size} bytes, more than the limit of {max_bytes}")
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise ValidationError(f"cannot read {what} file {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ValidationError(f"{what} file {path} is not UTF-8 text (byte {e.start})") from None


def read_jsonl_records(path, what: str, check: Callable[[Any, Any, int], Any],
                       error: Callable[[Any, int, str, str], ValidationError], repeat: str,
                       same: dict | None = None, key_field: str = "question_id", allow_nonfinite: bool = False,
                       good_lines: list | None = None) -> dict:
    """The finished records of a resumable JSONL file (one record per line, appended as it is
    produced), keyed by ``check(record, path, line_number)``, which validates a record and returns its key.

    A torn *last* line (an interrupted run) is dropped: the caller produces that record again. Any
    other line that is not valid JSON, or not a valid record (:func:`loads_json`'s strict parse, whose
    own one-line message names the line, then ``check``), and a line that repeats the key of an
    earlier one, is refused with one line built by ``error(path, line_number, field, allowed)`` (a line
    that is not JSON, a repeat); for a repeat ``field`` is ``key_field`` and ``allowed``
    is ``repeat`` formatted with ``key`` (a repeated line would otherwise be pooled twice, or the
    last one would silently win). The measurements (:func:`spinlib.sd.measure.read_records`) and the
    traces (:func:`spinlib.online.traces.read_traces`) are read here.

    ``same``: fields every record must hold with these values, checked when a run resumes the file
    (the torch kernel the records were computed on: a resumed file never pools two kernels, which its
    configuration key does not name); a record without them, or with others, is one line.

    ``allow_nonfinite``: ``NaN``/``Infinity`` are read (records the project wrote itself, where an undefined
    metric is a NaN: :func:`loads_json`). ``good_lines``: a list the kept lines are appended to, verbatim (a
    caller that resumes the file rewrites it from them, so that a torn last line is not appended onto).
    """
    lines = read_text_checked(path, what).splitlines()  # unreadable, a link's target gone, not UTF-8: one line
    done = {}
    for i, line in enumerate(lines, 1):
        try:
            json.loads(line)
        except ValueError:  # JSONDecodeError, or a number beyond the integer-string limit
            if i == len(lines):
                break  # torn last line
            raise error(path, i, "<line>", "valid JSON") from None
        r = loads_json(line, f"{path}:{i}", allow_nonfinite=allow_nonfinite)  # duplicate keys, depth: refused
        key = check(r, path, i)
        for field, value in (same or {}).items():
            if r.get(field) != value:
                raise error(path, i, field, f"{value!r}, the value of this run (it is {r.get(field)!r}): a resumed file "
                                            f"never pools records computed otherwise")
        if key in done:
            raise error(path, i, key_field, repeat.format(key=key))
        done[key] = r
        if good_lines is not None:
            good_lines.append(line)
    return done


class exclusive_lock:
    """An exclusive lock for a run that appends to a record file: refused in one line naming ``what`` when
    another run holds it (``fcntl.flock``, non-blocking). The one lock of every resumable record file (a
    study's store, a measurement's and a trace recording's JSONL).

    ``scope="file"`` locks ``<file>.lock``; ``scope="folder"`` locks ``<folder>/.lock``, one lock per output
    folder, so that two runs writing *different* files of one folder (two configurations of one measured task)
    are refused too. The lock file is opened without following a link (a planted link is refused in one line)
    and removed on release; a run that acquires it checks that the path still names the file it locked, so a
    lock removed by its holder between another run's open and its ``flock`` is never held by two runs."""

    def __init__(self, path: str | Path, what: str, *, scope: str = "file"):
        path = Path(path)
        if scope not in ("file", "folder"):
            raise ValidationError(f"scope must be 'file' or 'folder', got {scope!r}")
        self.lock = path.with_name(path.name + ".lock") if scope == "file" else path.parent / ".lock"
        self.what = what

    def __enter__(self):
        import fcntl

        for _ in range(100):  # each retry follows a holder that released (and removed) the lock meanwhile
            try:
                fd = os.open(self.lock, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
            except OSError as e:
                raise ValidationError(f"{self.lock}: cannot open the lock of {self.what} ({e.strerror}; a symbolic "
                                      "link there is refused)") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise ValidationError(f"{self.lock}: another run holds {self.what}; wait for it to end "
                                      f"(or delete the lock if no run is left)") from None
            try:
                same = os.stat(self.lock, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.fd = fd
                return self
            os.close(fd)
        raise ValidationError(f"{self.lock}: the lock of {self.what} keeps changing; is another run starting "
                              "and stopping in a loop?")

    def __exit__(self, *exc):
        self.lock.unlink(missing_ok=True)  # while held: a run that opened it before cannot then hold it (above)
        os.close(self.fd)
        return False


def open_append(path: str | Path):
    """``path`` opened for appending text, never through a link (a dangling link would create its target): the
    one way a resumable record file is appended to. A link is refused in one line."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
    except OSError as e:
        raise ValidationError(f"{path}: cannot append to it ({e.strerror}; a symbolic link there is refused)") from None
    return os.fdopen(fd, "a", encoding="utf-8")


def resume_jsonl(path: str | Path, read: Callable[[list], dict]) -> dict:
    """The finished records of a resumable JSONL file about to be appended to (call it holding
    :class:`exclusive_lock`): ``read(kept)`` parses the file (:func:`read_jsonl_records` with ``good_lines=kept``),
    then the file is rewritten atomically from the kept lines, so that a torn last line is dropped and never
    appended onto. A missing file has no records."""
    path = Path(path)
    if path.is_symlink():  # a dangling one too: it would be read through, then appended through
        raise ValidationError(f"{path}: is a symbolic link; a resumable record file must be a regular file "
                              "(remove the link)")
    if not path.exists():
        return {}
    kept: list[str] = []
    done = read(kept)
    atomic_write_text(path, "".join(line + "\n" for line in kept))
    return done


def read_json(source: str | Path, what: str) -> Any:
    """The parsed JSON of ``source``: a JSON object as a string (starting with ``{``) or a path to a
    file (:func:`read_text_checked`), parsed by :func:`loads_json`. Every failure is one
    :class:`ValidationError` naming ``what`` (e.g. "scenario"). Shared by every JSON the project
    reads from a user."""
    if isinstance(source, Path) or (isinstance(source, str) and not source.lstrip().startswith("{")):
        text = read_text_checked(source, what)
    else:
        text = source
    return loads_json(text, what)


def write_json(doc: Any, path: str | Path | None = None, indent: int = 2) -> str:
    """``json.dumps(doc)``; also written atomically to ``path`` (with a final newline) when given."""
    text = json.dumps(doc, indent=indent)
    if path is not None:
        atomic_write_text(Path(path), text + "\n", follow_symlinks=True)  # a path the user names
    return text


def atomic_write_text(path: Path, text: str, *, follow_symlinks: bool = False) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace`` (no torn files).

    A symbolic link at ``path`` is *replaced* by the new regular file, never written through:
    every cache, record and results file is written so (a link planted in a cache or results
    folder cannot redirect a write to another file). Only an output path the user names
    (``--output``, :meth:`Scenario.to_json`) passes ``follow_symlinks=True``: its link target is
    replaced, the link kept. A path that exists and is not a regular file (a directory, a named
    pipe, a device) is refused with one line, never replaced.
    """
    path = Path(path)
    if path.is_symlink() and follow_symlinks:
        path = Path(os.path.realpath(path))
    if path.exists() and not path.is_symlink() and not path.is_file():
        raise ValidationError(f"refusing to write {path}: it exists and is not a regular file")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def json_default(x):
    """The one JSON encoder of the library (``json.dumps(..., default=json_default)``): NumPy
    scalars and arrays, tuples and paths; anything else is an error, never a silent ``str``."""
    import numpy as np

    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, Path):
        return str(x)
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


__all__ = ["MAX_JSON_DEPTH", "MAX_JSON_BYTES", "MAX_JSON_VALUES", "MAX_JSON_INT", "loads_json", "read_text_checked", "read_json",
           "write_json", "atomic_write_text", "json_default"]
