"""``python -m pjrtx doctor``: versions, library path, MLX device, variables."""
from __future__ import annotations

import argparse
import sys


def doctor() -> int:
    from importlib import metadata

    import pjrtx
    from pjrtx import env
    from pjrtx._contract import load_extension

    ext = load_extension()

    def version(dist):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    print(f"pjrtx      {pjrtx.__version__} (extension {ext.__version__}, contract {ext.CONTRACT_VERSION})")
    print(f"jax        {version('jax')}")
    print(f"jaxlib     {version('jaxlib')}")
    print(f"mlx        {version('mlx')} (C++ library {ext.mlx_version()})")
    print(f"library    {ext.__file__}")
    try:
        device = ext.device_backend(env.get("PJRTX_DEVICE"))
    except Exception as e:  # a bad PJRTX_DEVICE value
        device = f"unavailable: {e}"
    print(f"device     {device} (PJRTX_DEVICE={env.get('PJRTX_DEVICE')})")
    print(f"PJRT API   {'.'.join(map(str, ext.abi_version()))}")
    print(f"lowerings  {len(ext.supported_ops())} StableHLO ops")
    print("variables:")
    for v in env.variables():
        print(f"  {v.name:<16} = {v.value!r:<10} {v.description} (default {v.default!r})")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pjrtx")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="print versions, library path, MLX device and PJRTX_* variables")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        return doctor()
    return 2


if __name__ == "__main__":
    sys.exit(main())
