"""The run machinery's own files: every file ``run_all.sh`` writes goes through this module.

``run_all.sh`` writes the machine facts of a run (``ENVIRONMENT.txt``), the marker of notebooks a run
has not finished (``RUN_INCOMPLETE``), each notebook's log and its executed copy. Each goes through
one of the commands below, which share two rules with the library's own writes
(:func:`spinlib.jsonio.atomic_write_text`):

* **no write follows a link**: a file is written beside its destination and moved into place with
  ``os.replace``, so a symbolic link planted at the destination is replaced, never written through;
  a destination that is a directory, a pipe or a device is refused in one line;
* **no folder is a link**: every folder from the run's output folder down to the destination must be
  a real folder (a planted ``results/executed -> /elsewhere`` link is refused in one line).

papermill writes its executed copy and the shell writes the notebook's log into a fresh private
folder (``scratch``, made by :func:`tempfile.mkdtemp` inside the output folder: a name nobody can
plant in advance), and ``place`` moves each into place when the notebook has finished.

Commands (``python -m spinlib.runfiles ...``; a refusal is one line and exit 2)::

    environment OUTDIR PATH     write the run's machine and package facts to PATH
    write OUTDIR PATH           standard input to PATH
    place OUTDIR SRC DEST       move SRC (a finished notebook or log) to DEST
    scratch OUTDIR              make a private folder for one notebook's outputs; print its path
    mark OUTDIR NB...           a run starts: RUN_INCOMPLETE lists NB... and what earlier runs left unfinished
    done OUTDIR NB              NB completed: it leaves the marker (which goes once it lists nothing)
    unfinished OUTDIR           print the notebooks earlier runs left unfinished, one per line

``unfinished`` is what makes an interrupted notebook visible: ``run_all.sh`` reports the notebooks it
prints at the start and at the end of every later run, until each has completed.
"""
from __future__ import annotations

import datetime as _dt
import importlib.metadata as _md
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from .jsonio import atomic_write_text
from .validation import ValidationError

MARKER = "RUN_INCOMPLETE"
#: the packages whose versions ENVIRONMENT.txt records
RECORDED_PACKAGES = ("numpy", "scipy", "cvxpy", "torch", "transformers", "datasets", "matplotlib", "seaborn",
                     "papermill")


def check_within(outdir: str | Path, dest: str | Path) -> Path:
    """``dest`` as a path under the real folder ``outdir``, every folder between them a real folder.

    Raises :class:`ValidationError` (one line) when ``outdir`` or a folder below it on the way to ``dest``
    is a symbolic link or not a folder, or when ``dest`` lies outside ``outdir``."""
    out, dest = Path(outdir).absolute(), Path(dest).absolute()
    if out.is_symlink():
        raise ValidationError(f"refusing to write under {out}: the output folder is a symbolic link")
    if out != dest and out not in dest.parents:
        raise ValidationError(f"refusing to write {dest}: it is outside the run's output folder {out}")
    for folder in [out, *reversed([p for p in dest.parents if out in p.parents])]:
        if folder.is_symlink():
            raise ValidationError(f"refusing to write {dest}: the folder {folder} is a symbolic link")
        if folder.exists() and not folder.is_dir():
            raise ValidationError(f"refusing to write {dest}: {folder} exists and is not a folder")
    return dest


def write(outdir, path, text: str) -> None:
    """``text`` to ``path`` under ``outdir`` (:func:`check_within`), atomically; a link at ``path`` is
    replaced, never written through."""
    dest = check_within(outdir, path)
    for folder in reversed([p for p in dest.parents if Path(outdir).absolute() in p.parents]):
        folder.mkdir(exist_ok=True)
    atomic_write_text(dest, text)


def place(outdir, src, dest) -> None:
    """Move the finished file ``src`` to ``dest`` under ``outdir`` with ``os.replace``: a link at ``dest``
    is replaced, not followed; a ``dest`` that exists and is not a regular file or a link is refused."""
    dest, src = check_within(outdir, dest), Path(src)
    if not src.is_file() or src.is_symlink():
        raise ValidationError(f"refusing to place {src}: it is not a regular file")
    if dest.exists() and not dest.is_symlink() and not dest.is_file():
        raise ValidationError(f"refusing to write {dest}: it exists and is not a regular file")
    os.replace(src, dest)


def scratch(outdir) -> Path:
    """A fresh private folder ``<outdir>/executed/.running-XXXXXXXX`` (mode 0700) for one notebook's
    executed copy and log while it runs."""
    executed = check_within(outdir, Path(outdir) / "executed")
    executed.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=".running-", dir=executed))


def environment_text() -> str:
    """The machine and package facts of a run: Python, platform, processor, commit (and whether
    ``spinlib`` or ``notebooks`` had uncommitted changes), and the versions of :data:`RECORDED_PACKAGES`."""
    lines = [f"python {sys.version.split()[0]}", f"platform {platform.platform()}"]
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    except OSError:
        cpu = []
    lines.append(f"cpu {cpu[0] if cpu else platform.processor()} x {os.cpu_count()}")
    git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    commit = git("rev-parse", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "spinlib", "notebooks")
    lines.append(f"git commit {commit}{' (with uncommitted changes)' if dirty else ''}")
    lines += [f"{p} {_md.version(p)}" for p in RECORDED_PACKAGES]
    return "\n".join(lines) + "\n"


def _marker(outdir) -> Path:
    return check_within(outdir, Path(outdir) / MARKER)


def unfinished(outdir) -> list[str]:
    """The notebooks (``notebooks/<NN>_<name>.ipynb`` paths) that ``<outdir>/RUN_INCOMPLETE`` lists: started by a
    run and not finished since. A marker that is not a regular file is refused in one line."""
    mark = _marker(outdir)
    if not mark.exists() and not mark.is_symlink():
        return []
    if mark.is_symlink() or not mark.is_file():
        raise ValidationError(f"{mark} is not a regular file: remove it (it should list unfinished notebooks)")
    return sorted({line.strip() for line in mark.read_text(encoding="utf-8", errors="replace").splitlines()
                   if line.startswith("notebooks/")})


def mark(outdir, notebooks) -> None:
    """A run of ``notebooks`` starts: the marker lists them and what earlier runs left unfinished."""
    listed = sorted(set(unfinished(outdir)) | set(notebooks))
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    write(outdir, _marker(outdir), f"run started {stamp}; unfinished notebooks (summaries/figures of these may "
                                   f"be partial):\n" + "".join(f"{n}\n" for n in listed))


def done(outdir, notebook: str) -> None:
    """``notebook`` completed: it leaves the marker; the marker goes once it lists nothing."""
    mark_path, left = _marker(outdir), [n for n in unfinished(outdir) if n != notebook]
    if not left:
        if mark_path.exists():
            mark_path.unlink()
        return
    head = mark_path.read_text(encoding="utf-8", errors="replace").splitlines()[0]
    write(outdir, mark_path, head + "\n" + "".join(f"{n}\n" for n in left))


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    usage = ("usage: python -m spinlib.runfiles environment OUTDIR PATH | write OUTDIR PATH | place OUTDIR SRC "
             "DEST | scratch OUTDIR | mark OUTDIR NB... | done OUTDIR NB | unfinished OUTDIR")
    arity = {"environment": 2, "write": 2, "place": 3, "scratch": 1, "done": 2, "unfinished": 1}
    if not args or (args[0] not in arity and args[0] != "mark") or (args[0] in arity and len(args) != arity[args[0]] + 1) \
            or (args[0] == "mark" and len(args) < 2):
        print(usage, file=sys.stderr)
        return 2
    cmd, rest = args[0], args[1:]
    try:
        if cmd == "environment":
            write(rest[0], rest[1], environment_text())
        elif cmd == "write":
            write(rest[0], rest[1], sys.stdin.read())
        elif cmd == "place":
            place(*rest)
        elif cmd == "scratch":
            print(scratch(rest[0]))
        elif cmd == "mark":
            mark(rest[0], rest[1:])
        elif cmd == "done":
            done(rest[0], rest[1])
        else:
            print("\n".join(unfinished(rest[0])))
    except (ValidationError, OSError) as e:
        print(f"run_all.sh: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
