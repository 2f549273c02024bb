"""StableHLO -> pjrtx plan, with jaxlib's own MLIR bindings.

The C++ compile step calls :func:`build_plan` under the GIL. Reusing jaxlib's
MLIR at run time means we read exactly the StableHLO version jaxlib writes.
"""
from __future__ import annotations

from pjrtx.frontend.parse import parse_module

__all__ = ["build_plan", "FrontendError"]


def __getattr__(name):
    # walker imports the C++ extension; loading it lazily lets parse and
    # partition (pure jaxlib MLIR) be imported and tested without it.
    if name in ("FrontendError", "build_plan_from_module"):
        from pjrtx.frontend import walker

        return getattr(walker, name)
    raise AttributeError(f"module 'pjrtx.frontend' has no attribute {name!r}")


def build_plan(code: bytes, format: str = "mlir", want_text: bool = False):
    """Returns (Plan, module text or None)."""
    from pjrtx._contract import load_extension
    from pjrtx.frontend.walker import build_plan_from_module

    ext = load_extension()
    if not ext.profile_enabled():
        with parse_module(code, format) as module:
            text = str(module) if want_text else None
            return build_plan_from_module(module), text
    # PJRTX_PROFILE: the two frontend phases as events inside "compile".
    t0 = ext.profile_now_us()
    with parse_module(code, format) as module:
        t1 = ext.profile_now_us()
        ext.profile_event("compile", "parse StableHLO", t0, t1 - t0)
        text = str(module) if want_text else None
        t2 = ext.profile_now_us()
        plan = build_plan_from_module(module)
        ext.profile_event("compile", "build plan", t2, ext.profile_now_us() - t2)
        return plan, text
