#!/bin/sh
# run.sh - run one tips-server test script with the repository's Python environment
# (<repo>/.venv, found relative to this file, never the current directory); a missing
# environment is a failure that names the script that installs it.
#   tests/server/run.sh test_diff.py --server build/tips-server ...
here=$(cd "$(dirname "$0")" && pwd)
py="$here/../../.venv/bin/python"
if [ ! -x "$py" ]; then
	echo "FAIL: $py not found; create it with scripts/install-deps.sh" >&2
	exit 1
fi
script=$1
shift
exec "$py" "$here/$script" "$@"
