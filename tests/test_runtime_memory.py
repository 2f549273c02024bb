"""Repeated executes must not grow memory: device memory (MLX's active bytes,
reported through PJRT_Device_MemoryStats) and process RSS."""
import gc
import os

import jax
import jax.numpy as jnp
import numpy as np

MIB = 1 << 20


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def in_use(device) -> int:
    return device.memory_stats()["bytes_in_use"]


F = jax.jit(lambda a, b: ((a @ b + 1.0).T * 2, jnp.sum(a, axis=0)))
HOST = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)  # 64 KiB


def step(device):
    a = jax.device_put(HOST, device)
    b = jax.device_put(HOST[::-1], device)
    out, s = F(a, b)
    out.block_until_ready()
    np.asarray(s)
    for arr in (a, b, out, s):
        arr.delete()


def test_memory_stats_see_live_buffers(pjrtx_device):
    # The probe the leak test relies on must move when buffers are kept:
    # 20 kept results of 64 KiB each are >= 1.25 MiB. F is compiled before
    # the baseline: a compile may free memory inside the window (the
    # executable cache evicts its least recently used program, constants
    # included, once it holds 64), hiding part of what the results add.
    step(pjrtx_device)
    gc.collect()
    base = in_use(pjrtx_device)
    kept = [F(jax.device_put(HOST, pjrtx_device), jax.device_put(HOST, pjrtx_device))[0]
            for _ in range(20)]
    jax.block_until_ready(kept)
    assert in_use(pjrtx_device) - base >= 20 * HOST.nbytes
    for k in kept:
        k.delete()
    del kept
    gc.collect()
    assert in_use(pjrtx_device) - base < 20 * HOST.nbytes


def test_repeated_execute_does_not_leak(pjrtx_device):
    for _ in range(30):  # warm-up: compile, MLX buffer cache, allocator arenas
        step(pjrtx_device)
    gc.collect()
    dev0, rss0 = in_use(pjrtx_device), rss_bytes()
    for _ in range(300):
        step(pjrtx_device)
    gc.collect()
    dev1, rss1 = in_use(pjrtx_device), rss_bytes()
    # Each step moves ~200 KiB through the device; a leak of one buffer per
    # step would add >= 300 * 64 KiB = 18.75 MiB. Allow 1 MiB of device
    # bytes (MLX's constants, scratch) and 16 MiB of RSS (malloc arenas).
    assert dev1 - dev0 < MIB, (dev0, dev1)
    assert rss1 - rss0 < 16 * MIB, (rss0, rss1)


def test_dropped_references_free_device_memory(pjrtx_device):
    # Without explicit delete: Python dropping the last reference destroys
    # the PJRT buffer, which must release the MLX array.
    for _ in range(5):
        step(pjrtx_device)
    gc.collect()
    dev0 = in_use(pjrtx_device)
    for _ in range(100):
        x = jax.device_put(HOST, pjrtx_device)
        y, s = F(x, x)
        np.asarray(y)
        del x, y, s
    gc.collect()
    assert in_use(pjrtx_device) - dev0 < MIB
