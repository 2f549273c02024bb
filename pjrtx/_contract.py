"""The Python side's half of the Python/C++ contract (see csrc/python/bindings.h)."""
CONTRACT_VERSION = 1


def load_extension():
    """Imports pjrtx._pjrtx and refuses one built for another contract."""
    from pjrtx import _pjrtx

    have = getattr(_pjrtx, "CONTRACT_VERSION", None)
    if have != CONTRACT_VERSION:
        raise ImportError(
            f"pjrtx: the compiled extension speaks contract {have}, the Python package "
            f"{CONTRACT_VERSION}; reinstall pjrtx so both come from one build")
    return _pjrtx
