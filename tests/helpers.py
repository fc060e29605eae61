"""Helpers shared by the test modules (pytest puts ``tests/`` on ``sys.path``; import as ``helpers``)."""
import subprocess
import sys


def spinlib_cli(*args, cwd=None, env=None, timeout=600):
    """``python -m spinlib ARGS`` in a fresh process: its ``CompletedProcess`` (stdout and stderr as text)."""
    return subprocess.run([sys.executable, "-m", "spinlib", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)
