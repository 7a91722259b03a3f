//! A GPU matrix as the kernels and cuBLAS take it, and the 32-bit
//! indices they take it with: below every product of the backend, so
//! that the classical products (`gemm`), cuBLAS and the INT8 pipelines
//! name it without naming each other.

use cudarc::driver::sys::CUdeviceptr;

use crate::cuda::runtime::memory::DeviceMatrix;
use crate::error::Error;

/// A GPU matrix operand: device address of element (0, 0), row-major with
/// `ld` elements between rows, or, when `trans`, column-major with `ld`
/// elements between columns (a transposed view of a row-major matrix:
/// element (i, j) at `ptr + (j·ld + i)` elements). cuBLAS and the INT8
/// pipelines read either; the tile kernels and the fast algorithms take
/// row-major operands only (see `ClassicalGemm::takes_transposed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Operand {
    pub ptr: CUdeviceptr,
    pub ld: usize,
    pub trans: bool,
}

impl<T> From<&DeviceMatrix<T>> for Operand {
    /// The matrix's address and leading dimension.
    fn from(m: &DeviceMatrix<T>) -> Operand {
        Operand::row_major(m.ptr, m.ld)
    }
}

impl Operand {
    /// A row-major operand at `ptr`, rows `ld` elements apart.
    pub fn row_major(ptr: CUdeviceptr, ld: usize) -> Operand {
        Operand {
            ptr,
            ld,
            trans: false,
        }
    }

    /// The operand moved to element (row, col).
    pub fn at<T>(self, row: usize, col: usize) -> Operand {
        let offset = match self.trans {
            false => row * self.ld + col,
            true => col * self.ld + row,
        };
        Operand {
            ptr: self.ptr + (offset * std::mem::size_of::<T>()) as CUdeviceptr,
            ..self
        }
    }

    /// The element strides (between rows, between columns).
    pub fn strides(self) -> (usize, usize) {
        match self.trans {
            false => (self.ld, 1),
            true => (1, self.ld),
        }
    }
}

/// `v` as the 32-bit index CUDA kernels and cuBLAS take, or a typed
/// error naming `what`.
pub(crate) fn to_i32(what: &str, v: usize) -> Result<i32, Error> {
    i32::try_from(v).map_err(|_| Error::Unsupported {
        algorithm: "CUDA",
        what: format!("{what} = {v} (CUDA kernels and cuBLAS index with 32-bit ints)"),
    })
}

/// One product C ← α·A·B + β·C of row-major operands in GPU memory, A
/// m×k and B k×n: what the kernels' launches, cuBLAS, the INT8 pipelines
/// and the resident products take, as one value. β = 0 never reads C.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeviceGemm<T> {
    /// (m, k, n).
    pub shape: (usize, usize, usize),
    pub alpha: T,
    pub a: Operand,
    pub b: Operand,
    pub beta: T,
    pub c: Operand,
}

impl<T> DeviceGemm<T> {
    /// The `i`-th product of a strided batch that starts with this one:
    /// A, B and C each `i·strides` elements further on.
    pub fn nth(self, i: usize, (sa, sb, sc): (usize, usize, usize)) -> Self {
        let offset = |o: Operand, stride: usize| Operand {
            ptr: o.ptr + (i * stride * std::mem::size_of::<T>()) as CUdeviceptr,
            ..o
        };
        DeviceGemm {
            a: offset(self.a, sa),
            b: offset(self.b, sb),
            c: offset(self.c, sc),
            ..self
        }
    }

    /// The strides (in elements, of A, B and C) at which `products` form
    /// a strided batch after the first, if they do: each operand's
    /// address a fixed non-negative distance after the previous one's,
    /// and every product of the same shape, scalars and leading dimensions.
    pub fn strided(products: &[DeviceGemm<T>]) -> Option<(usize, usize, usize)>
    where
        T: PartialEq + Copy,
    {
        let first = products.first()?;
        let item = std::mem::size_of::<T>() as CUdeviceptr;
        let step = |pick: fn(&DeviceGemm<T>) -> Operand| -> Option<usize> {
            let (p0, p1) = (pick(first), pick(products.get(1).unwrap_or(first)));
            let bytes = p1.ptr.checked_sub(p0.ptr)?;
            (bytes % item == 0).then_some((bytes / item) as usize)
        };
        let strides = (step(|p| p.a)?, step(|p| p.b)?, step(|p| p.c)?);
        let same = products.iter().enumerate().all(|(i, p)| {
            let expected = first.nth(i, strides);
            p.shape == first.shape
                && p.alpha == first.alpha
                && p.beta == first.beta
                && p.a == expected.a
                && p.b == expected.b
                && p.c == expected.c
        });
        same.then_some(strides)
    }

    /// Whether A or B is read transposed.
    pub fn any_transposed(&self) -> bool {
        self.a.trans || self.b.trans
    }

    /// The product of the block of C at (row, col) with `shape`: A's rows
    /// from `row`, B's columns from `col`, the depth `shape.1` from A's
    /// column (and B's row) `depth`.
    pub fn block(
        self,
        (row, depth, col): (usize, usize, usize),
        shape: (usize, usize, usize),
    ) -> Self {
        DeviceGemm {
            shape,
            a: self.a.at::<T>(row, depth),
            b: self.b.at::<T>(depth, col),
            c: self.c.at::<T>(row, col),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product(a: u64, b: u64, c: u64) -> DeviceGemm<f32> {
        let op = |ptr| Operand::row_major(ptr, 8);
        DeviceGemm {
            shape: (4, 8, 8),
            alpha: 1.0,
            a: op(a),
            b: op(b),
            beta: 0.0,
            c: op(c),
        }
    }

    #[test]
    fn a_batch_at_fixed_distances_is_strided() {
        // A every 32 elements, B shared (stride 0), C every 40.
        let batch: Vec<_> = (0..5u64)
            .map(|i| product(4096 + 128 * i, 65536, (1 << 20) + 160 * i))
            .collect();
        assert_eq!(DeviceGemm::strided(&batch), Some((32, 0, 40)));
        for (i, p) in batch.iter().enumerate() {
            assert_eq!(batch[0].nth(i, (32, 0, 40)).a, p.a);
            assert_eq!(batch[0].nth(i, (32, 0, 40)).c, p.c);
        }
        assert_eq!(DeviceGemm::strided(&batch[..1]), Some((0, 0, 0)));
        assert_eq!(DeviceGemm::<f32>::strided(&[]), None);
    }

    #[test]
    fn an_irregular_batch_is_not_strided() {
        let mut batch: Vec<_> = (0..4u64)
            .map(|i| product(4096 + 128 * i, 65536, (1 << 20) + 160 * i))
            .collect();
        batch[3].c.ptr += 4;
        assert_eq!(DeviceGemm::strided(&batch), None);
        batch[3].c.ptr -= 4;
        batch[2].beta = 1.0;
        assert_eq!(DeviceGemm::strided(&batch), None);
        batch[2].beta = 0.0;
        batch[1].a.ld = 16;
        assert_eq!(DeviceGemm::strided(&batch), None);
        // Going backwards, or by part of an element, is no strided batch.
        let back = [product(4096, 0, 8192), product(4000, 0, 9000)];
        assert_eq!(DeviceGemm::strided(&back), None);
        let odd = [product(4096, 0, 8192), product(4098, 0, 9000)];
        assert_eq!(DeviceGemm::strided(&odd), None);
    }
}
