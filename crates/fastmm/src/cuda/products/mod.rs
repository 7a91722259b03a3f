//! Products on GPUs, over the kernels: of host matrices in one piece or
//! of resident operands ([`in_core`]), streamed in tiles beyond the GPU's
//! memory ([`out_of_core`]), Strassen/Winograd with GPU temporaries
//! ([`strassen`]), and over several GPUs: a schedule's pieces
//! ([`distributed`]), host-resident bands ([`hosted`]) and Strassen's
//! levels across the GPUs ([`caps`]); and cuBLAS's own complex products
//! of host matrices ([`complex`]).

pub(crate) mod caps;
pub(crate) mod complex;
pub(crate) mod distributed;
pub(crate) mod hosted;
pub(crate) mod in_core;
pub(crate) mod out_of_core;
pub(crate) mod strassen;
