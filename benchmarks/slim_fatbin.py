"""Slim a CUDA shared library for one GPU architecture, so that onnxruntime-gpu fits the lent machine's transfer limit.

The onnxruntime-gpu 1.31.1 wheel's ``libonnxruntime_providers_cuda.so`` is 284 MB, 218 MB of it the ``.nv_fatbin``
section: the same kernels compiled for every supported architecture (cubin) plus PTX. The H200 loads only the
sm_90 cubins. This tool walks the section's fat binaries (header: magic 0xBA55ED50, version, header size, fat size;
then entries: kind 1 = PTX / 2 = ELF cubin, header size, payload size, ..., arch) and zeroes the payload of every
entry that is not an sm_<keep> cubin, leaving every header, offset and size as it was: the file keeps its layout,
the driver still finds the sm_90 entry it picks for this GPU, and the zeroed bytes compress to nothing.

    python benchmarks/slim_fatbin.py IN.so OUT.so --keep 90

Only for carrying the library to a machine whose GPU architecture is known (the H200: sm_90); a library slimmed
this way fails on any other GPU ("no kernel image is available").
"""

from __future__ import annotations

import argparse
import struct
import subprocess
from collections import Counter
from pathlib import Path

MAGIC = 0xBA55ED50


def section(path: Path, name: str = ".nv_fatbin") -> tuple[int, int]:
    """(file offset, size) of a section, from readelf."""
    out = subprocess.run(
        ["readelf", "-S", "-W", str(path)], capture_output=True, text=True, check=True
    ).stdout
    for line in out.splitlines():
        parts = line.replace("[ ", "[").split()
        if name in parts:
            i = parts.index(name)
            return int(parts[i + 3], 16), int(parts[i + 4], 16)
    raise SystemExit(f"{path} has no {name} section")


def slim(data: bytearray, start: int, size: int, keep: int) -> Counter:
    """Zero every entry payload in ``data[start:start+size]`` that is not an sm_``keep`` cubin."""
    seen: Counter = Counter()
    pos, end = start, start + size
    while pos + 16 <= end:
        magic, _version, header, fat = struct.unpack_from("<IHHQ", data, pos)
        if magic != MAGIC:
            pos += 8  # fat binaries are 8-byte aligned; padding between them
            continue
        entry, stop = pos + header, pos + header + fat
        while entry + 32 <= stop:
            kind, _v, ehead, payload = struct.unpack_from("<HHIQ", data, entry)
            arch = struct.unpack_from("<I", data, entry + 28)[0]
            body = entry + ehead
            keep_it = kind == 2 and arch == keep
            seen[("ptx" if kind == 1 else "cubin", arch, "kept" if keep_it else "zeroed")] += payload
            if not keep_it:
                data[body : body + payload] = bytes(payload)
            entry = body + payload
        pos = stop
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--keep", type=int, default=90, help="the sm_ architecture whose cubins stay")
    args = parser.parse_args()
    start, size = section(args.source)
    data = bytearray(args.source.read_bytes())
    seen = slim(data, start, size, args.keep)
    args.target.write_bytes(bytes(data))
    for (kind, arch, what), count in sorted(seen.items()):
        print(f"{kind:5} sm_{arch:<4} {what:6} {count / 1e6:8.1f} MB")


if __name__ == "__main__":
    main()
