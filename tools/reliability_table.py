"""Write docs/reliability.md from the failure matrix in tests/test_failure_matrix.py.

    python tools/reliability_table.py          # rewrite the file
    python tools/reliability_table.py --check  # exit 1 if the file is out of date

The matrix is the top of the file; what follows the `HAND_WRITTEN` line (the
repeated kills of tools/chaos_train.py) is written by hand and kept as it is.
"""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's zoo and tests

import test_failure_matrix as matrix  # noqa: E402 - tests/ is not a package


def rendered(current):
    """The file's new text: the rendered matrix, then the hand-written part of `current`."""
    _, marker, tail = current.partition("\n" + matrix.HAND_WRITTEN)
    return matrix.render_table() + (marker + tail if marker else "")


def main(argv):
    current = matrix.DOC.read_text(encoding="utf-8") if matrix.DOC.is_file() else ""
    if "--check" in argv:
        if matrix.generated_part(current) != matrix.render_table():
            print(f"{matrix.DOC} is out of date: run python tools/reliability_table.py")
            return 1
        return 0
    matrix.DOC.write_text(rendered(current), encoding="utf-8")
    print(f"wrote {matrix.DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
