"""A frozen copy of the service's code for one run: edits to the tree during a long run must not
change what the server, the schema set-up or the flask commands run half-way through."""

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVICE = ("catalogue.py", "app", "models", "schemas", "feeds", "wsgi.py", "gunicorn.conf.py")


def snapshot(dest: str, commit: str | None = None) -> str:
    """Copy the service's code into `dest` (from the working tree, or from `commit` with
    git archive, which leaves the repository alone); a description of what was copied."""
    os.makedirs(dest, exist_ok=True)
    if commit:
        with tempfile.TemporaryFile() as archive:
            present = set(_git("ls-tree", "--name-only", commit).split())
            paths = [name for name in SERVICE if name in present]  # older commits lack some
            subprocess.run(["git", "archive", commit, *paths], cwd=ROOT, stdout=archive, check=True)
            archive.seek(0)
            with tarfile.open(fileobj=archive) as tar:
                tar.extractall(dest, filter="data")
        origin = f"commit {_git('rev-parse', '--short', commit)}"
    else:
        for name in SERVICE:
            source = os.path.join(ROOT, name)
            if os.path.isdir(source):
                shutil.copytree(source, os.path.join(dest, name), ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, dest)
        changed = _git("diff", "HEAD", "--name-only", "--", *SERVICE).split()
        untracked = _git("ls-files", "--others", "--exclude-standard", "--", *SERVICE).split()
        edits = len(changed) + len(untracked)
        origin = f"working tree at commit {_git('rev-parse', '--short', 'HEAD')}" + (
            f" with {edits} uncommitted file(s) in the service's code" if edits else ", no uncommitted changes"
        )
    return f"{origin} (content sha1 {_digest(dest)})"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def _digest(directory: str) -> str:
    """A hash of every file's path and content, to tell two runs' code apart."""
    digest = hashlib.sha1()
    for base, dirs, files in sorted(os.walk(directory)):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(base, name)
            digest.update(os.path.relpath(path, directory).encode())
            with open(path, "rb") as content:
                digest.update(content.read())
    return digest.hexdigest()[:10]
