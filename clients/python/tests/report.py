"""Runs the tests discovered in this directory whose file names match the
pattern given (default ``test_*.py``) and prints one JSON line per test:
``{"test": "<Class>.<method>", "outcome": "ok"|"fail"|"error"|"skip",
"detail": "..."}`` (what the tests print goes to stderr), then exits 0
when every test passed and none was skipped. The conformance
harness (conformance/, Go) reads these lines to report each test as a
subtest of its own; a skipped test is reported as what it is."""

from __future__ import annotations

import json
import os
import sys
import unittest


class _Lines(unittest.TestResult):
    """A result that prints each test's outcome to out as it ends."""

    def __init__(self, out) -> None:
        super().__init__()
        self.out = out

    def _emit(self, test: unittest.TestCase, outcome: str, detail: str = "") -> None:
        name = f"{type(test).__name__}.{test._testMethodName}"
        print(json.dumps({"test": name, "outcome": outcome, "detail": detail}), file=self.out, flush=True)

    def addSuccess(self, test: unittest.TestCase) -> None:  # noqa: N802 (unittest's name)
        super().addSuccess(test)
        self._emit(test, "ok")

    def addFailure(self, test, err) -> None:  # noqa: N802
        super().addFailure(test, err)
        self._emit(test, "fail", self.failures[-1][1])

    def addError(self, test, err) -> None:  # noqa: N802
        super().addError(test, err)
        self._emit(test, "error", self.errors[-1][1])

    def addSkip(self, test, reason) -> None:  # noqa: N802
        super().addSkip(test, reason)
        self._emit(test, "skip", reason)


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    pattern = sys.argv[1] if len(sys.argv) > 1 else "test_*.py"
    suite = unittest.defaultTestLoader.discover(here, pattern=pattern, top_level_dir=here)
    # What the tests print (timings) goes to stderr: stdout carries the
    # JSON lines alone.
    result, sys.stdout = _Lines(sys.stdout), sys.stderr
    suite.run(result)
    if result.testsRun == 0:
        print(f"no test matched {pattern}", file=sys.stderr)
        return 1
    return 0 if result.wasSuccessful() and not result.skipped else 1


if __name__ == "__main__":
    sys.exit(main())
