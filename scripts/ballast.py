#!/usr/bin/env python3
"""Holds GPU memory so that only SIZE stays free: a real ceiling for runs whose
path uses no managed memory (the `device` policy), emulating a small card.

    python3 scripts/ballast.py 4GiB &   # prints "ballast: ... free" when ready
    ... run hemem ...
    kill %1

Uses the driver API through ctypes (libcuda), plain cuMemAlloc (never managed
memory), in chunks of at most 1 GiB. Exits when killed or when stdin closes.
"""
import ctypes
import re
import signal
import sys
import time

UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
         "kb": 10**3, "mb": 10**6, "gb": 10**9}


def parse(text):
    m = re.fullmatch(r"\s*([0-9.]+)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in UNITS:
        sys.exit(f"ballast: not a size: {text}")
    return int(float(m.group(1)) * UNITS[m.group(2).lower()])


def check(status, what):
    if status != 0:
        sys.exit(f"ballast: {what} failed with CUresult {status}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    keep_free = parse(sys.argv[1])
    cuda = ctypes.CDLL("libcuda.so.1")
    check(cuda.cuInit(0), "cuInit")
    device = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    context = ctypes.c_void_p()
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    check(cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
    held = []
    while free.value > keep_free:
        chunk = min(free.value - keep_free, 1 << 30)
        ptr = ctypes.c_uint64()
        if cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(chunk)) != 0:
            break
        held.append(ptr)
        check(cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
    print(f"ballast: holding {len(held)} blocks; {free.value} of {total.value} bytes free", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
