# Sourced by the other scripts: make sure .venv exists and holds what setup.cfg asks for.
#   source scripts/venv.sh         the service and the feeds (what scripts/serve needs)
#   source scripts/venv.sh test    the same, the test tools and ClickHouse's packages, setup.cfg's [test]
#                                  and [clickhouse] extras (scripts/test)
# Reinstalls only when setup.cfg or setup.py changed since the last install, or when the test
# tools are asked for and not there yet. The stamp records the set installed with the hash:
# serving after testing installs nothing, and a reinstall keeps the test tools once they came.
# Strict in the scripts that source it; a person's shell that sources it (docs/feeding.md)
# keeps its own options: `set -e` there would close it at the next failing command.
case $- in *i*) ;; *) set -euo pipefail ;; esac
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.installed-from"
HASH="$(cat "$ROOT/setup.cfg" "$ROOT/setup.py" | python3 -c 'import hashlib,sys;print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"
read -r HAD_HASH HAD_SET 2>/dev/null < "$STAMP" || true
if [ -n "${HAD_HASH:-}" ] && [ -z "${HAD_SET:-}" ]; then
    HAD_SET=test  # a stamp of before the two sets: everything was installed then
fi
SET=serve
if [ "${1:-}" = test ] || [ "${HAD_SET:-}" = test ]; then
    SET=test
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "Creating the virtual environment in .venv ..." >&2
    python3 -m venv "$VENV"
fi
if [ "${HAD_HASH:-}" != "$HASH" ] || [ "${HAD_SET:-}" != "$SET" ]; then
    if [ "$SET" = test ]; then
        echo "Installing the service and its test tools into .venv ..." >&2
        TARGET="$ROOT[test,clickhouse]"
    else
        echo "Installing the service into .venv ..." >&2
        TARGET="$ROOT"
    fi
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$TARGET" >&2 &&
        echo "$HASH $SET" > "$STAMP"
fi
unset HASH HAD_HASH HAD_SET SET TARGET
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
