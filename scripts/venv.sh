# Sourced by the other scripts: make sure .venv exists and holds what setup.cfg asks for.
# Reinstalls only when setup.cfg or setup.py changed since the last install.
# Strict in the scripts that source it; a person's shell that sources it (docs/feeding.md)
# keeps its own options: `set -e` there would close it at the next failing command.
case $- in *i*) ;; *) set -euo pipefail ;; esac
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.installed-from"
WANT="$(cat "$ROOT/setup.cfg" "$ROOT/setup.py" | python3 -c 'import hashlib,sys;print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"

if [ ! -x "$VENV/bin/python" ]; then
    echo "Creating the virtual environment in .venv ..." >&2
    python3 -m venv "$VENV"
fi
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
    echo "Installing the service and its test tools into .venv ..." >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT[test]" >&2 &&
        echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
