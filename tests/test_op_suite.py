"""jax_smoke/op_suite.py's programs (one per op family) against XLA:CPU, and
the check that together they lower every op pjrtx registers: a lowering
nobody exercises is a lowering nobody tested."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "jax_smoke"))

import op_suite  # noqa: E402
from pjrtx import _pjrtx  # noqa: E402


def test_op_suite_matches_cpu_and_covers_every_registered_op():
    before = dict(_pjrtx.lowering_counts())
    rows = op_suite.run_suite(verbose=False)
    failed = [f"{c.op} ({c.dtype}): max error {err:.3g} {note}" for c, ok, err, note in rows if not ok]
    assert not failed, "op suite mismatches:\n" + "\n".join(failed)
    after = dict(_pjrtx.lowering_counts())
    exercised = {op for op, n in after.items() if n > before.get(op, 0)}
    missing = sorted(set(_pjrtx.supported_ops()) - exercised)
    assert not missing, f"registered lowerings that jax_smoke/op_suite.py never lowers: {missing}"
