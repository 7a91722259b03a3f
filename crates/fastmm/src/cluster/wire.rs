//! Buffers of any length through MPI. A message's count is a C `int`, so
//! one of 2³¹ bytes or more (a 32768×16384 f32 piece) cannot be one
//! message: these helpers move a buffer as consecutive messages of at
//! most [`CLUSTER_MESSAGE_BYTES`], which both ends cut alike from the
//! same length.

use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::topology::{Process, SimpleCommunicator};
use mpi::traits::{Communicator, CommunicatorCollectives, Destination, Root, Source};

use crate::element::{DType, Element};
use crate::tunables::CLUSTER_MESSAGE_BYTES;

/// The bytes of a slice of elements (what a message moves).
pub(super) fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: T is f32, f64, i32 or i64: plain bytes, no padding; the
    // slice covers size_of_val(data) initialised bytes.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast(), std::mem::size_of_val(data)) }
}

fn as_bytes_mut<T: Element>(data: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`; every bit pattern is a valid f32, f64,
    // i32 or i64, so the bytes may be written freely.
    unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr().cast(), std::mem::size_of_val(data)) }
}

/// `data`'s bytes, cut into the messages that carry them.
pub(super) fn messages<T: Element>(data: &[T]) -> std::slice::Chunks<'_, u8> {
    as_bytes(data).chunks(CLUSTER_MESSAGE_BYTES)
}

/// `data`'s bytes, cut into the messages that fill them.
pub(super) fn messages_mut<T: Element>(data: &mut [T]) -> std::slice::ChunksMut<'_, u8> {
    as_bytes_mut(data).chunks_mut(CLUSTER_MESSAGE_BYTES)
}

/// Sends `data` to `to` (nothing for an empty slice).
pub(super) fn send<T: Element>(to: &Process<'_>, data: &[T]) {
    for part in messages(data) {
        to.send(part);
    }
}

/// Receives from `from` what it sent with [`send`] into `data` (of the
/// same length).
pub(super) fn receive<T: Element>(from: &Process<'_>, data: &mut [T]) {
    for part in messages_mut(data) {
        from.receive_into(part);
    }
}

/// Every rank's `mine` (each of the same length), in rank order, into
/// `all` (ranks × that length).
pub(super) fn all_gather<T: Element>(world: &SimpleCommunicator, mine: &[T], all: &mut [T]) {
    let len = std::mem::size_of_val(mine);
    let parts = world.size() as usize;
    debug_assert_eq!(std::mem::size_of_val(all), len * parts);
    let all = as_bytes_mut(all);
    let mut gathered = Vec::new();
    for (index, part) in messages(mine).enumerate() {
        gathered.resize(part.len() * parts, 0u8);
        world.all_gather_into(part, &mut gathered[..]);
        place(&gathered, index * CLUSTER_MESSAGE_BYTES, len, all);
    }
}

/// Puts one message's gather (every rank's bytes `at..at + w` of its `len`,
/// in rank order) into its places in `all` (rank r's bytes at r·len).
fn place(gathered: &[u8], at: usize, len: usize, all: &mut [u8]) {
    let parts = all.len() / len.max(1);
    let width = gathered.len() / parts.max(1);
    for (rank, got) in gathered.chunks(width.max(1)).enumerate().take(parts) {
        all[rank * len + at..rank * len + at + got.len()].copy_from_slice(got);
    }
}

/// MPI_Reduce with MPI_SUM at `root`, in T's own MPI type (integer sums
/// wrap as the ring's do); `into` is the root's result.
pub(super) fn reduce_sum<T: Element>(root: &Process<'_>, mine: &[T], into: Option<&mut [T]>) {
    fn go<U: Equivalence>(root: &Process<'_>, mine: &[U], into: Option<&mut [U]>) {
        let per = (CLUSTER_MESSAGE_BYTES / std::mem::size_of::<U>()).max(1);
        match into {
            Some(sum) => {
                for (part, out) in mine.chunks(per).zip(sum.chunks_mut(per)) {
                    root.reduce_into_root(part, out, SystemOperation::sum());
                }
            }
            None => {
                for part in mine.chunks(per) {
                    root.reduce_into(part, SystemOperation::sum());
                }
            }
        }
    }
    match T::DTYPE {
        DType::F32 => go::<f32>(root, typed(mine), into.map(typed_mut)),
        DType::F64 => go::<f64>(root, typed(mine), into.map(typed_mut)),
        DType::I32 => go::<i32>(root, typed(mine), into.map(typed_mut)),
        DType::I64 => go::<i64>(root, typed(mine), into.map(typed_mut)),
    }
}

/// The slice as its concrete element type U (T's own type).
fn typed<T: Element, U>(data: &[T]) -> &[U] {
    debug_assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<U>());
    // SAFETY: the callers pass U = the type T::DTYPE names, which is T.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast(), data.len()) }
}

fn typed_mut<T: Element, U>(data: &mut [T]) -> &mut [U] {
    debug_assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<U>());
    // SAFETY: as in `typed`.
    unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr().cast(), data.len()) }
}

#[cfg(test)]
mod tests {
    use super::place;

    /// Cut every rank's bytes into messages of `cut` bytes, gather each
    /// as MPI would, and place it: every rank's bytes land whole.
    #[test]
    fn gathered_messages_land_in_rank_order() {
        for parts in 1..=4usize {
            for len in [0usize, 1, 5, 8, 13] {
                for cut in [1usize, 2, 3, 8, 64] {
                    let mine =
                        |r: usize| -> Vec<u8> { (0..len).map(|i| (r * 50 + i) as u8).collect() };
                    let mut all = vec![0xEEu8; parts * len];
                    for (index, _) in mine(0).chunks(cut).enumerate() {
                        let at = index * cut;
                        let gathered: Vec<u8> = (0..parts)
                            .flat_map(|r| mine(r)[at..(at + cut).min(len)].to_vec())
                            .collect();
                        place(&gathered, at, len, &mut all);
                    }
                    let want: Vec<u8> = (0..parts).flat_map(mine).collect();
                    assert_eq!(all, want, "{parts} ranks, {len} bytes, messages of {cut}");
                }
            }
        }
    }
}
