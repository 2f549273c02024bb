"""The Python side's half of the Python/C++ contract (see csrc/python/bindings.h)."""
CONTRACT_VERSION = 1


def load_extension():
    """Imports pjrtx._pjrtx and refuses one built for another contract."""
    try:
        from pjrtx import _pjrtx
    except ImportError as e:
        import pjrtx
        # A missing mlx:: C++ symbol (Linux: "undefined symbol: _ZN3mlx...",
        # macOS: "Symbol not found: __ZN3mlx...").
        if "3mlx" in str(e) and ("undefined symbol" in str(e) or "ymbol not found" in str(e)):
            raise ImportError(mlx_mismatch_message(e)) from None
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
    # The symbols matched, but MLX's C++ ABI is only promised within a release.
    built = getattr(_pjrtx, "MLX_BUILD_VERSION", None)
    if built and built != _pjrtx.mlx_version():
        raise ImportError(mlx_mismatch_message(
            f"built against mlx {built}, running with libmlx {_pjrtx.mlx_version()}"))
    return _pjrtx


def mlx_mismatch_message(error) -> str:
    """The extension links MLX's C++ library, whose ABI changes between
    releases (0.32.1 -> 0.32.4 did): name both sides and the two fixes."""
    from importlib import metadata

    try:
        have = metadata.version("mlx")
    except metadata.PackageNotFoundError:
        have = "none"
    try:
        pins = [r for r in metadata.requires("pjrtx") or []
                if r.replace(" ", "").startswith(("mlx==", "mlx[cpu]=="))]
    except metadata.PackageNotFoundError:  # a source checkout: see pyproject.toml
        pins = []
    want = pins[0].split(";")[0].strip() if pins else "the mlx release in pyproject.toml"
    return (f"pjrtx: the compiled extension was built against another MLX release than the "
            f"installed mlx {have} ({error}). MLX's C++ library changes between releases; "
            f"pjrtx requires {want}: install that (pip install '{want}'), or rebuild pjrtx "
            f"against mlx {have} (pip install --force-reinstall --no-deps --no-build-isolation "
            f"<pjrtx source>).")
