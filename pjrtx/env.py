"""Every PJRTX_* environment variable, from the one table in the extension
(csrc/common/env.cc), with typed readers for the Python side."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    name: str
    default: str
    description: str

    @property
    def value(self) -> str:
        # As the extension reads it: PJRTX_DEVICES, when unset, follows
        # XLA_FLAGS' --xla_force_host_platform_device_count.
        from pjrtx._contract import load_extension

        return load_extension().env_value(self.name)


def variables() -> list[Variable]:
    from pjrtx._contract import load_extension

    return [Variable(*v) for v in load_extension().env_vars()]


def get(name: str) -> str:
    for v in variables():
        if v.name == name:
            return v.value
    raise KeyError(f"pjrtx: {name} is not a PJRTX_* variable")


def flag(name: str) -> bool:
    return get(name).strip().lower() in ("1", "true", "yes", "on")
