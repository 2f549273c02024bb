"""The Python side's half of the Python/C++ contract (see csrc/python/bindings.h)."""
CONTRACT_VERSION = 1


def load_extension():
    """Imports pjrtx._pjrtx and refuses one built for another contract."""
    try:
        from pjrtx import _pjrtx
    except ImportError as e:
        import pjrtx
        raise ImportError(
            f"pjrtx: no compiled extension next to {pjrtx.__file__} ({e}). Python found "
            "a pjrtx without one: a source checkout on the path (e.g. running from the "
            "repository root) shadows the installed package. Run from another directory, "
            "or build in place (README, Development).") from None

    have = getattr(_pjrtx, "CONTRACT_VERSION", None)
    if have != CONTRACT_VERSION:
        raise ImportError(
            f"pjrtx: the compiled extension speaks contract {have}, the Python package "
            f"{CONTRACT_VERSION}; reinstall pjrtx so both come from one build")
    return _pjrtx
