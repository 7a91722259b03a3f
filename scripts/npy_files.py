"""Inputs and a check for the file products of the GPU scripts.

    python3 scripts/npy_files.py make DIR SEED M K N
        DIR/a.npy (M×K, C order) and DIR/b.npy (K×N, Fortran order),
        f32 uniform in [-1, 1)
    python3 scripts/npy_files.py compare DIR LABEL
        prints DIR/c.npy's largest error against numpy's f64 product,
        relative to the product's largest entry
"""
import sys

import numpy as np


def make(d, seed, m, k, n):
    rng = np.random.default_rng(int(seed))
    np.save(f"{d}/a.npy", rng.uniform(-1, 1, (int(m), int(k))).astype(np.float32))
    b = rng.uniform(-1, 1, (int(k), int(n))).astype(np.float32)
    np.save(f"{d}/b.npy", np.asfortranarray(b))


def compare(d, label):
    a, b, c = (np.load(f"{d}/{x}.npy") for x in "abc")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.abs(c - ref).max() / np.abs(ref).max()
    print(f"{label}: shape {c.shape} {c.dtype}, max relative error {err}")


if __name__ == "__main__":
    {"make": make, "compare": compare}[sys.argv[1]](*sys.argv[2:])
