//! The reference twin: plain scalar loops compiled for the baseline target,
//! with separate multiply and add. It is the fallback on CPUs without the
//! SIMD extensions and the oracle the fast kernels are tested against.

use crate::cpu::packed::kernel::Microkernel;
use crate::element::Element;

/// Portable MR×NR kernel for element type `T`.
pub struct Generic<T, const MR: usize, const NR: usize>(std::marker::PhantomData<T>);

// SAFETY: `run` touches exactly the memory of the contract, and plain Rust
// runs on every CPU.
unsafe impl<T: Element, const MR: usize, const NR: usize> Microkernel<T> for Generic<T, MR, NR> {
    const MR: usize = MR;
    const NR: usize = NR;
    const NAME: &'static str = "generic";

    fn is_available() -> bool {
        true
    }

    #[inline(never)]
    unsafe fn run(
        kc: usize,
        alpha: T,
        a: *const T,
        b: *const T,
        beta: T,
        (c, rs_c, cs_c): (*mut T, isize, isize),
    ) {
        let mut acc = [[T::ZERO; NR]; MR];
        for p in 0..kc {
            // SAFETY: the contract gives MR·kc elements at `a` and kc·NR at `b`.
            let (a_col, b_row) = unsafe {
                (
                    &*(a.add(p * MR) as *const [T; MR]),
                    &*(b.add(p * NR) as *const [T; NR]),
                )
            };
            for (acc_row, &a_ip) in acc.iter_mut().zip(a_col) {
                for (acc_ij, &b_pj) in acc_row.iter_mut().zip(b_row) {
                    *acc_ij = acc_ij.add_product(a_ip, b_pj);
                }
            }
        }
        for (i, acc_row) in acc.iter().enumerate() {
            for (j, &value) in acc_row.iter().enumerate() {
                // SAFETY: i < MR and j < NR address the tile of the contract.
                let cij = unsafe { &mut *c.offset(i as isize * rs_c + j as isize * cs_c) };
                let product = alpha.mul(value);
                *cij = if beta == T::ZERO {
                    product
                } else {
                    product.add_product(beta, *cij)
                };
            }
        }
    }
}
