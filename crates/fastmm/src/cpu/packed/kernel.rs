//! The microkernel contract.
//!
//! A microkernel computes one MR×NR tile of C from two packed micro-panels:
//!
//! **C_tile ← α·Ã·B̃ + β·C_tile**
//!
//! * **Packed layout.** Ã is MR×kc, stored column after column: element
//!   (i, p) is at `a[p·MR + i]`. B̃ is kc×NR, stored row after row: element
//!   (p, j) is at `b[p·NR + j]`. Packing ([`super::packing`]) pads partial
//!   panels with zeros, so a kernel always computes a full tile.
//! * **C addressing.** Element (i, j) of the tile is at `c[i·rs_c + j·cs_c]`
//!   for every i < MR and j < NR: the kernel reads (when β ≠ 0) and writes
//!   the whole tile.
//! * **Edge tiles.** The kernel never sees one. Where C has fewer than MR
//!   rows or NR columns left, the driver has [`Microkernel::run_edge`]
//!   write an MR×NR scratch tile (β = 0; only the vectors holding the
//!   valid columns need be computed) and then merges the valid part into C
//!   itself ([`super::driver`]).
//! * **β = 0 never reads C.** With β = 0 the old contents of the tile,
//!   NaN included, do not influence the result.
//! * **kc = 0** is allowed and gives C_tile ← β·C_tile.
//!
//! **The direct variant** ([`Microkernel::run_direct`]) computes a tile
//! from A and B as they lie in memory instead of packed panels: the small
//! products' path ([`super::direct`]), where packing would cost a third
//! of the time.
//!
//! Every kernel has a reference twin, [`super::kernels::generic`]: plain
//! scalar loops with the same contract, used as the portable fallback and as
//! the oracle the fast kernels are tested against.

use crate::cpu::packed::panels;
use crate::element::Element;
use crate::matrix::MatRef;

/// Largest MR·NR of any kernel.
pub(crate) const MAX_TILE: usize = 512;

/// A register-blocked MR×NR kernel; see the module documentation for the
/// contract every implementation must keep.
///
/// # Safety
/// Implementors must touch exactly the memory the contract describes, and
/// must only be run where [`Microkernel::is_available`] is true.
pub unsafe trait Microkernel<T: Element>: Send + Sync + 'static {
    /// Rows of the tile.
    const MR: usize;
    /// Columns of the tile.
    const NR: usize;
    /// Name shown in reports, e.g. `avx512 8x48`.
    const NAME: &'static str;

    /// Whether the running CPU has the instructions this kernel uses.
    fn is_available() -> bool;

    /// C_tile ← α·Ã·B̃ + β·C_tile.
    ///
    /// # Safety
    /// `a` holds MR·kc and `b` holds kc·NR readable elements; every
    /// `c + i·rs_c + j·cs_c` (i < MR, j < NR) is valid for reads and writes
    /// and not aliased elsewhere; [`Microkernel::is_available`] is true.
    unsafe fn run(
        kc: usize,
        alpha: T,
        a: *const T,
        b: *const T,
        beta: T,
        c: (*mut T, isize, isize),
    );

    /// C_d ← s_d·Ã·B̃ + β·C_d for every destination (s_d, C_d), all
    /// addressed with the same strides: the tile is computed once and added
    /// into each (the kernel of the fused Strassen primitive, where one
    /// product feeds up to four blocks of C per level). The default runs
    /// [`Microkernel::run`] into a scratch tile and merges it; SIMD kernels
    /// keep the tile in registers and update each destination from there.
    ///
    /// # Safety
    /// As for [`Microkernel::run`], for every destination; destinations do
    /// not overlap.
    unsafe fn run_multi(
        kc: usize,
        a: *const T,
        b: *const T,
        beta: T,
        dests: &[(T, *mut T)],
        rs_c: isize,
        cs_c: isize,
    ) {
        let mut tile = [T::ZERO; MAX_TILE];
        assert!(
            Self::MR * Self::NR <= MAX_TILE,
            "tile larger than the scratch"
        );
        // SAFETY: the scratch tile is MR×NR row-major; the panels are the
        // caller's, per the contract.
        unsafe {
            Self::run(
                kc,
                T::ONE,
                a,
                b,
                T::ZERO,
                (tile.as_mut_ptr(), Self::NR as isize, 1),
            )
        };
        for &(scale, c) in dests {
            // SAFETY: each destination is a full MR×NR tile, per the contract.
            unsafe {
                merge_tile(
                    &tile,
                    Self::NR,
                    (Self::MR, Self::NR),
                    scale,
                    beta,
                    (c, rs_c, cs_c),
                )
            };
        }
    }

    /// scratch ← α·Ã·B̃ for the first `cols` columns (1 ≤ cols ≤ NR) of an
    /// MR×NR row-major scratch tile (row stride NR): the edge tiles of C,
    /// whose valid part the driver merges into C. Columns from `cols` on
    /// hold unspecified values afterwards, and the scratch's old contents
    /// are never read. The default computes the whole tile; SIMD kernels
    /// compute only the vectors that hold the `cols` columns, so a last
    /// panel of 16 columns costs a 48-wide kernel a third of a full tile.
    ///
    /// # Safety
    /// As for [`Microkernel::run`], with `scratch` holding MR·NR elements.
    #[inline]
    unsafe fn run_edge(
        kc: usize,
        alpha: T,
        a: *const T,
        b: *const T,
        scratch: *mut T,
        cols: usize,
    ) {
        debug_assert!((1..=Self::NR).contains(&cols));
        // SAFETY: forwarded contract; the scratch is a full MR×NR tile.
        unsafe { Self::run(kc, alpha, a, b, T::ZERO, (scratch, Self::NR as isize, 1)) }
    }

    /// Whether [`Microkernel::run_direct`] is this kernel's own vector
    /// code. The default is the scalar reference below, which is correct
    /// but only there for the twin and the tests: the direct path runs
    /// kernels that set this.
    const DIRECT: bool = false;

    /// Elements per vector of [`Microkernel::run_direct`] (1 for scalar
    /// code): the unit in which the direct path shares B's columns out
    /// over its panels.
    const LANES: usize = 1;

    /// C ← α·A·B + β·C on the first `rows` rows (1 ≤ rows ≤ MR) and `cols`
    /// columns (1 ≤ cols ≤ NR) of a tile, from unpacked operands: A's
    /// element (i, p) at `a[i·rs_a + p·cs_a]` (read for i < rows only) and
    /// B's element (p, j) at `b[p·rs_b + j]`, each row of B read for its
    /// first `cols` columns only (vector kernels mask the last vector, so
    /// a panel ending inside one needs no padded copy). Only the rows×cols
    /// elements of C are touched; β = 0 never reads them.
    ///
    /// # Safety
    /// Those elements of A (kc deep) and of B (kc rows) are readable; every `c + i·rs_c + j·cs_c` (i < rows, j < cols) is valid
    /// for reads and writes and not aliased elsewhere;
    /// [`Microkernel::is_available`] is true.
    unsafe fn run_direct(
        kc: usize,
        alpha: T,
        (a, rs_a, cs_a): (*const T, isize, isize),
        (b, rs_b): (*const T, isize),
        beta: T,
        (c, rs_c, cs_c): (*mut T, isize, isize),
        (rows, cols): (usize, usize),
    ) {
        debug_assert!((1..=Self::MR).contains(&rows) && (1..=Self::NR).contains(&cols));
        for i in 0..rows {
            for j in 0..cols {
                let mut sum = T::ZERO;
                for p in 0..kc {
                    // SAFETY: i < rows, p < kc and j < cols ≤ NR address
                    // the elements the contract makes readable.
                    let (aip, bpj) = unsafe {
                        (
                            *a.offset(i as isize * rs_a + p as isize * cs_a),
                            *b.offset(p as isize * rs_b + j as isize),
                        )
                    };
                    sum = sum.add_product(aip, bpj);
                }
                // SAFETY: (i, j) is inside the tile of the contract.
                let cij = unsafe { &mut *c.offset(i as isize * rs_c + j as isize * cs_c) };
                let product = alpha.mul(sum);
                *cij = if beta == T::ZERO {
                    product
                } else {
                    product.add_product(beta, *cij)
                };
            }
        }
    }

    /// Packs the w×kb view `src` into ⌈w/width⌉ panels of `width` lanes in
    /// the layout above (element (i, p) of panel r at
    /// `dst[r·width·kb + p·width + i]`, zero past w); the driver packs Ã
    /// with width MR and B̃ (as B̃ᵀ) with width NR. The default compiles the
    /// copy for the baseline instruction set; SIMD kernels override it to
    /// compile the same loops with their own.
    ///
    /// # Panics
    /// If `dst` is shorter than ⌈w/width⌉·width·kb.
    #[inline]
    fn pack(src: MatRef<'_, T>, width: usize, dst: &mut [T]) {
        panels::pack_panels(src, width, dst);
    }
}

/// C_tile ← scale·tile + β·C_tile over the first rows×cols elements of a
/// row-major scratch tile with `nr` columns; β = 0 never reads C. The edge
/// policy of the contract, and the default multi-destination update.
///
/// # Safety
/// Every `c + i·rs_c + j·cs_c` (i < rows, j < cols) is valid for reads and
/// writes and not otherwise aliased; `tile` holds rows·nr elements.
pub(crate) unsafe fn merge_tile<T: Element>(
    tile: &[T],
    nr: usize,
    (rows, cols): (usize, usize),
    scale: T,
    beta: T,
    (c, rs_c, cs_c): (*mut T, isize, isize),
) {
    for i in 0..rows {
        for j in 0..cols {
            // SAFETY: (i, j) is inside the destination tile.
            let cij = unsafe { &mut *c.offset(i as isize * rs_c + j as isize * cs_c) };
            let product = scale.mul(tile[i * nr + j]);
            *cij = if beta == T::ZERO {
                product
            } else {
                product.add_product(beta, *cij)
            };
        }
    }
}
