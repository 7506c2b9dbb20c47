"""Write docs/reliability.md from the failure matrix in tests/test_failure_matrix.py.

    python tools/reliability_table.py          # rewrite the file
    python tools/reliability_table.py --check  # exit 1 if the file is out of date
"""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's zoo and tests

import test_failure_matrix as matrix  # noqa: E402 - tests/ is not a package


def main(argv):
    table = matrix.render_table()
    if "--check" in argv:
        if matrix.DOC.read_text(encoding="utf-8") != table:
            print(f"{matrix.DOC} is out of date: run python tools/reliability_table.py")
            return 1
        return 0
    matrix.DOC.write_text(table, encoding="utf-8")
    print(f"wrote {matrix.DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
