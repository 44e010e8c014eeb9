"""No test asserts a wall-clock bound: a loaded machine misses any of them.

A test shows a deadline, a signal or a rate by what the API test server saw: which requests
arrived, in which order, which the client hung up on, how many bytes went out. This check
reads every test file's syntax tree and fails on an `assert` that compares something read
from a clock (`time.monotonic()`, `perf_counter()`, `time.time()`, an `elapsed()`, or a name
computed from one) with a constant. A clock compared with a clock (a wait's own patience)
or with a count is not a bound of the run.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
CLOCKS = {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "elapsed"}
BOUNDS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
#: Bounds that may stay, as (file, the assert's text); none today.
KNOWN: set[tuple[str, str]] = set()


def _called(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return None


def _clock_names(tree: ast.AST) -> set[str]:
    """Names assigned from a clock, or from a name that was (to a fixed point)."""
    names: set[str] = set()
    while True:
        found = {
            target.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.NamedExpr)
            and node.value is not None
            and _reads_clock(node.value, names)
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name)
        }
        if found <= names:
            return names
        names |= found


def _reads_clock(node: ast.AST, names: set[str]) -> bool:
    return any(
        _called(n) in CLOCKS or (isinstance(n, ast.Name) and n.id in names) for n in ast.walk(node)
    )


def _constant(node: ast.AST) -> bool:
    """Literals and UPPER_CASE names, with arithmetic: a number fixed when the test is written."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float)
    if isinstance(node, ast.Name):
        return node.id.isupper()
    if isinstance(node, ast.Attribute):
        return node.attr.isupper()
    if isinstance(node, ast.BinOp):
        return _constant(node.left) and _constant(node.right)
    if isinstance(node, ast.UnaryOp):
        return _constant(node.operand)
    return False


def clock_bounds(path: Path) -> list[tuple[int, str]]:
    """(line, condition) of each assert in `path` that bounds a clock reading by a constant."""
    source = path.read_text()
    tree = ast.parse(source)
    clocks = _clock_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            sides = [compare.left, *compare.comparators]
            for op, a, b in zip(compare.ops, sides[:-1], sides[1:], strict=True):
                timed = _reads_clock(a, clocks) and _constant(b)
                if isinstance(op, BOUNDS) and (timed or (_reads_clock(b, clocks) and _constant(a))):
                    found.append((node.lineno, ast.unparse(node.test)))
                    break
    return found


def test_no_test_asserts_a_wall_clock_bound() -> None:
    found = [
        f"tests/{path.relative_to(TESTS)}:{line}: {text}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, text in clock_bounds(path)
        if (str(path.relative_to(TESTS)), text) not in KNOWN
    ]
    assert found == [], "\n".join(
        ["assert what the API test server saw (order, counts, hang-ups), not seconds:", *found]
    )


def test_the_check_finds_a_bound_and_leaves_counts_and_patience_alone(tmp_path: Path) -> None:
    path = tmp_path / "test_timed.py"
    path.write_text(
        "import time\n"
        "from tests.helpers import FirstRequest\n"
        "def test_timed(api, proc):\n"
        "    started = time.monotonic()\n"
        "    proc.wait()\n"
        "    elapsed = time.monotonic() - started\n"
        "    assert proc.returncode == 1 and elapsed < 3 + EXIT\n"  # line 7: a bound
        "    assert FirstRequest(api).elapsed() <= 4.5\n"  # line 8: a bound
        "    end = time.monotonic() + 30\n"
        "    assert time.monotonic() < end, 'patience, not a bound'\n"
        "    assert len(api.requests) <= WORKERS + QPS * elapsed\n"  # a count
        "    assert 0 < api.requests[-1].bytes_sent < FEW_SECONDS\n"  # a byte count
    )

    assert [line for line, _ in clock_bounds(path)] == [7, 8]
