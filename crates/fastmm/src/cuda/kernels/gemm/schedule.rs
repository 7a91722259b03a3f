//! How `cuda-fast` lays the tiles of one product over the GPU's resident
//! blocks: one block per tile, split-K when there are too few tiles, and
//! for a last wave that would leave most SMs idle, the wave-tail split or
//! stream-K. Plain data, planned per launch and tested without a GPU.

use crate::cuda::tunables::{
    CUDA_RASTER_GROUP, CUDA_SPLIT_K_MIN_DEPTH, CUDA_STREAM_K_MAX_WAVES,
    CUDA_STREAM_K_MAX_WAVES_ONE_BLOCK, CUDA_WAVE_TAIL_MAX_WAVES, CUDA_WAVE_TAIL_MIN_SLICES,
};

/// How `cuda-fast` lays the tiles of one product over the GPU's resident
/// blocks (`blocks_per_sm` per SM), decided per launch by [`FastSchedule::plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FastSchedule {
    /// One block per tile of C.
    Tiles,
    /// Too few tiles to fill the SMs: k is split into this many slices,
    /// each written to a workspace and then added into C.
    SplitK(usize),
    /// Many waves of tiles whose last one would leave most SMs idle: those
    /// tiles run as a separate split-K product.
    WaveTail(WaveTail),
    /// The last waves' tiles shared out over one wave of blocks by k steps
    /// (`kernels/fast_stream.cu`).
    StreamK(StreamK),
}

/// Stream-K for the SIMT kernel: the first `sk_first` tiles (in the
/// grouped order) run one per block; the `sk_tiles` after them, those of a
/// partial last wave and of [`CUDA_STREAM_K_FULL_WAVES`] whole ones, are
/// ⌈k/BK⌉ units each, split evenly over `workers` blocks (one wave). A
/// worker's range may begin and end inside tiles; those pieces go to a
/// workspace and a fix-up kernel adds each split tile's pieces in a fixed
/// order. Against whole tiles the last waves then take (sk_tiles /
/// workers) tiles' time instead of ⌈sk_tiles / workers⌉.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamK {
    /// Tiles that run whole, one per block, before the shared ones.
    pub sk_first: usize,
    /// Tiles shared out.
    pub sk_tiles: usize,
    /// Blocks they are shared among.
    pub workers: usize,
}

/// The tiles of a last, nearly empty wave of `cuda-fast` blocks, run as a
/// split-K product of their own (a "data-parallel + split-K" hybrid, as
/// CUTLASS's stream-K offers): with s slices they cost about 1/s of a
/// wave instead of a whole one. In the grouped block order
/// (`kernels/block_common.cuh`) the last tiles are the last columns of the
/// last strip of [`CUDA_RASTER_GROUP`] tile rows, so the tail is taken as
/// a rectangle reaching C's bottom-right corner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaveTail {
    /// Grouped index of the tail's first tile: blocks of the main launch
    /// from here on return at once.
    pub first_tile: usize,
    /// The tail's top-left tile (tile row, tile column).
    pub origin: (usize, usize),
    /// Its tiles.
    pub tiles: usize,
    /// The k slices each of its tiles is split into.
    pub slices: usize,
}

impl FastSchedule {
    /// The schedule of an m×k×n product in tiles of `(rows, cols)` on `sms`
    /// multiprocessors holding `blocks_per_sm` blocks each; `wave_tail`
    /// allows [`FastSchedule::WaveTail`].
    ///
    /// Split-K: when the tiles of C leave SMs idle, as many slices as fill
    /// one wave of resident blocks without starting a second, each at least
    /// `CUDA_SPLIT_K_MIN_DEPTH` deep. A partial second wave would leave
    /// most SMs idle while it runs: 64 tiles in 5 slices on 132 SMs at two
    /// blocks each is 320 blocks, 1.2 waves.
    ///
    /// Wave tail: with w = tiles mod (resident blocks) ≠ 0 the last wave
    /// holds w tiles. The tail is the fewest whole columns of the last
    /// strip that cover w tiles, so the other tiles take one wave fewer; it
    /// is split into as many slices as its tiles fit one wave, at least
    /// `CUDA_WAVE_TAIL_MIN_SLICES` and each at least
    /// `CUDA_SPLIT_K_MIN_DEPTH` deep, when the other tiles take at most
    /// `CUDA_WAVE_TAIL_MAX_WAVES` waves. At 8192² f64 in 128×128 tiles on
    /// 132 SMs: 4096 tiles are 31 waves and 4 tiles; the tail is a strip
    /// of 8 rows, one column, in 16 slices.
    ///
    /// Stream-K, where the kernel has it (`stream_k_waves`: the whole waves
    /// to share out with the partial one, see [`StreamK`]), takes the place
    /// of the wave tail on the same shapes.
    pub fn plan(
        (m, k, n): (usize, usize, usize),
        (rows, cols): (usize, usize),
        sms: usize,
        blocks_per_sm: usize,
        wave_tail: bool,
        stream_k_waves: Option<usize>,
    ) -> FastSchedule {
        let (tiles_m, tiles_n) = (m.div_ceil(rows), n.div_ceil(cols));
        let tiles = tiles_m * tiles_n;
        let sms = sms.max(1);
        let resident = sms * blocks_per_sm.max(1);
        if tiles == 0 {
            return FastSchedule::Tiles;
        }
        if tiles < sms {
            let slices = (resident / tiles).min(k / CUDA_SPLIT_K_MIN_DEPTH);
            return if slices > 1 {
                FastSchedule::SplitK(slices)
            } else {
                FastSchedule::Tiles
            };
        }
        let last_wave = tiles % resident;
        let whole_waves = tiles / resident;
        // Against the one-block kernels' plain path (two k steps per trip;
        // the stream-K kernel has one) stream-K pays over fewer waves.
        let stream_k_max_waves = if blocks_per_sm <= 1 {
            CUDA_STREAM_K_MAX_WAVES_ONE_BLOCK
        } else {
            CUDA_STREAM_K_MAX_WAVES
        };
        if let Some(waves) = stream_k_waves {
            if whole_waves > 0
                && whole_waves <= stream_k_max_waves
                && last_wave != 0
                && k >= CUDA_SPLIT_K_MIN_DEPTH
            {
                let sk_tiles = last_wave + waves.min(whole_waves) * resident;
                return FastSchedule::StreamK(StreamK {
                    sk_first: tiles - sk_tiles,
                    sk_tiles,
                    workers: resident,
                });
            }
        }
        if !wave_tail
            || whole_waves == 0
            || whole_waves > CUDA_WAVE_TAIL_MAX_WAVES
            || last_wave == 0
        {
            return FastSchedule::Tiles;
        }
        let strip_top = (tiles_m - 1) / CUDA_RASTER_GROUP * CUDA_RASTER_GROUP;
        let strip_rows = tiles_m - strip_top;
        let columns = last_wave.div_ceil(strip_rows);
        let tail_tiles = strip_rows * columns;
        let slices = (resident / tail_tiles).min(k / CUDA_SPLIT_K_MIN_DEPTH);
        if columns > tiles_n || slices < CUDA_WAVE_TAIL_MIN_SLICES {
            return FastSchedule::Tiles;
        }
        FastSchedule::WaveTail(WaveTail {
            first_tile: tiles - tail_tiles,
            origin: (strip_top, tiles_n - columns),
            tiles: tail_tiles,
            slices,
        })
    }

    /// What runs, for reports: "", "split-K 4", "wave tail 8 tiles × 16 k slices".
    pub fn describe(self) -> String {
        match self {
            FastSchedule::Tiles => String::new(),
            FastSchedule::SplitK(slices) => format!("split-K {slices}"),
            FastSchedule::WaveTail(tail) => {
                format!("wave tail {} tiles × {} k slices", tail.tiles, tail.slices)
            }
            FastSchedule::StreamK(sk) => {
                format!("stream-K {} tiles over {} blocks", sk.sk_tiles, sk.workers)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tile (row, column) of grouped block index `id` on a tiles_m ×
    /// tiles_n grid: `raster_tile` of `kernels/block_common.cuh`.
    fn grouped_tile(id: usize, (tiles_m, tiles_n): (usize, usize)) -> (usize, usize) {
        let per_group = CUDA_RASTER_GROUP * tiles_n;
        let first_row = id / per_group * CUDA_RASTER_GROUP;
        let rows = (tiles_m - first_row).min(CUDA_RASTER_GROUP);
        let in_group = id % per_group;
        (first_row + in_group % rows, in_group / rows)
    }

    #[test]
    fn the_wave_tail_of_8192_squared_dmma_is_one_column_in_16_slices() {
        // H100: 132 SMs, one 128×128 block each.
        let plan = FastSchedule::plan((8192, 8192, 8192), (128, 128), 132, 1, true, None);
        assert_eq!(
            plan,
            FastSchedule::WaveTail(WaveTail {
                first_tile: 4088,
                origin: (56, 63),
                tiles: 8,
                slices: 16,
            })
        );
        assert_eq!(plan.describe(), "wave tail 8 tiles × 16 k slices");
        let off = FastSchedule::plan((8192, 8192, 8192), (128, 128), 132, 1, false, None);
        assert_eq!(off, FastSchedule::Tiles);
        // 16384² f32 in 128×256 tiles: 62 whole waves, past the most.
        let many = FastSchedule::plan((16384, 16384, 16384), (128, 256), 132, 1, true, None);
        assert_eq!(many, FastSchedule::Tiles);
        // 4096²: 512 tiles, a last wave of 116 (15 columns, 120 tiles).
        let full = FastSchedule::plan((4096, 4096, 4096), (128, 256), 132, 1, true, None);
        assert_eq!(full, FastSchedule::Tiles);
        // Exact waves: 132 × 2 tiles.
        let exact = FastSchedule::plan((128 * 132, 64, 512), (128, 256), 132, 1, true, None);
        assert_eq!(exact, FastSchedule::Tiles);
        // Too shallow to split: k below two slices of the minimum depth.
        let shallow = FastSchedule::plan((16384, 1000, 16384), (128, 256), 132, 1, true, None);
        assert_eq!(shallow, FastSchedule::Tiles);
        // Few tiles: split-K as before (6 tiles, 22 fill the SMs, k allows 4).
        let few = FastSchedule::plan((264, 2056, 264), (128, 256), 132, 1, true, None);
        assert_eq!(few, FastSchedule::SplitK(4));
        assert_eq!(few.describe(), "split-K 4");
        let one = FastSchedule::plan((264, 148, 264), (128, 256), 132, 1, true, None);
        assert_eq!(one, FastSchedule::Tiles);
    }

    #[test]
    fn stream_k_shares_the_partial_wave_and_one_whole_one_where_the_wave_tail_would_not() {
        // H100, f32 128×256 tiles, one block per SM: 4096² is 512 tiles,
        // 3 waves and 116; the wave tail cannot split 116 tiles.
        let plan = FastSchedule::plan((4096, 4096, 4096), (128, 256), 132, 1, true, Some(1));
        assert_eq!(
            plan,
            FastSchedule::StreamK(StreamK {
                sk_first: 264,
                sk_tiles: 248,
                workers: 132,
            })
        );
        assert_eq!(plan.describe(), "stream-K 248 tiles over 132 blocks");
        // With no whole wave added only the partial one; never more whole
        // waves than there are.
        let partial = FastSchedule::plan((4096, 4096, 4096), (128, 256), 132, 1, true, Some(0));
        assert!(matches!(partial, FastSchedule::StreamK(sk) if sk.sk_tiles == 116));
        let all = FastSchedule::plan((4096, 4096, 4096), (128, 256), 132, 1, true, Some(9));
        assert!(matches!(all, FastSchedule::StreamK(sk) if sk.sk_first == 0 && sk.sk_tiles == 512));
        // Past the most waves, exact waves, shallow k and few tiles: as
        // without stream-K.
        for (dims, expected) in [
            ((16384, 16384, 16384), FastSchedule::Tiles),
            // One block per SM: the plain kernel (two k steps per trip)
            // from 5 whole waves on; 6144² is 8 waves and 96 tiles, 8192²
            // 15 and 68 (neither a wave tail: more than half a wave).
            ((6144, 6144, 6144), FastSchedule::Tiles),
            ((8192, 8192, 8192), FastSchedule::Tiles),
            ((8192, 1024, 8192), FastSchedule::Tiles),
            ((128 * 132, 4096, 512), FastSchedule::Tiles),
            ((4096, 500, 4096), FastSchedule::Tiles),
            ((264, 2056, 264), FastSchedule::SplitK(4)),
        ] {
            let plan = FastSchedule::plan(dims, (128, 256), 132, 1, true, Some(1));
            assert_eq!(plan, expected, "{dims:?}");
        }
        // Where the wave tail applies, stream-K takes its place up to its
        // own most waves: 8192² in 128×64 tiles is 31 waves of 264 and 8
        // tiles, 8192×4096 15 and 136.
        let many = FastSchedule::plan((8192, 8192, 8192), (128, 64), 132, 2, true, Some(0));
        assert!(matches!(many, FastSchedule::WaveTail(_)), "{many:?}");
        let half = FastSchedule::plan((8192, 8192, 4096), (128, 64), 132, 2, true, Some(0));
        assert!(
            matches!(half, FastSchedule::StreamK(sk) if sk.sk_tiles == 136),
            "{half:?}"
        );
    }

    /// kernels/fast_stream.cu's arithmetic, transcribed: worker g's units
    /// [start(g), start(g + 1)) of sk_tiles × steps.
    fn stream_start(g: usize, total: usize, workers: usize) -> usize {
        total * g / workers
    }

    /// The kernel's worker of unit u (the fix-up's inverse of stream_start).
    fn stream_worker(u: usize, total: usize, workers: usize) -> usize {
        ((u + 1) * workers - 1) / total
    }

    #[test]
    fn stream_k_pieces_cover_every_unit_once_and_the_fixup_finds_each() {
        // The workers' loop of gemm_fast_stream and the slot rule of
        // gemm_fast_stream_fixup, transcribed from the kernel: every unit
        // of every shared tile is computed exactly once; each split tile's
        // pieces are in the slots the fix-up reads, no slot is written
        // twice, and a tile the fix-up skips was stored whole.
        let mut cases = 0;
        for workers in [1, 3, 7, 132, 264] {
            for steps in [1, 2, 5, 16, 69, 256] {
                for sk_tiles in [1, 2, 5, 116, 248, 300] {
                    let total = sk_tiles * steps;
                    let mut covered = vec![0u32; total];
                    let mut whole = vec![false; sk_tiles];
                    // (tile, slot) of each partial piece.
                    let mut pieces: Vec<(usize, usize)> = Vec::new();
                    for g in 0..workers {
                        let (first, end) = (
                            stream_start(g, total, workers),
                            stream_start(g + 1, total, workers),
                        );
                        let mut u = first;
                        while u < end {
                            let (tile, s0) = (u / steps, u % steps);
                            let s1 = steps.min(s0 + (end - u));
                            for count in &mut covered[tile * steps + s0..tile * steps + s1] {
                                *count += 1;
                            }
                            if s0 == 0 && s1 == steps {
                                whole[tile] = true;
                            } else {
                                pieces.push((tile, 2 * g + usize::from(u != first)));
                            }
                            u += s1 - s0;
                        }
                    }
                    let what = format!("{workers} workers, {steps} steps, {sk_tiles} tiles");
                    assert!(covered.iter().all(|&c| c == 1), "{what}");
                    let mut slots: Vec<usize> = pieces.iter().map(|&(_, slot)| slot).collect();
                    slots.sort_unstable();
                    slots.dedup();
                    assert_eq!(slots.len(), pieces.len(), "{what}: a slot written twice");
                    for (tile, &stored_whole) in whole.iter().enumerate() {
                        let unit0 = tile * steps;
                        let g0 = stream_worker(unit0, total, workers);
                        let g1 = stream_worker(unit0 + steps - 1, total, workers);
                        if g0 == g1 {
                            assert!(stored_whole, "{what}: tile {tile} skipped but split");
                            continue;
                        }
                        let mut read: Vec<(usize, usize)> = (g0..=g1)
                            .filter(|&g| {
                                stream_start(g, total, workers)
                                    < stream_start(g + 1, total, workers)
                            })
                            .map(|g| {
                                let slot =
                                    2 * g + usize::from(stream_start(g, total, workers) < unit0);
                                (tile, slot)
                            })
                            .collect();
                        let mut written: Vec<(usize, usize)> =
                            pieces.iter().filter(|p| p.0 == tile).copied().collect();
                        read.sort_unstable();
                        written.sort_unstable();
                        assert_eq!(read, written, "{what}: tile {tile}");
                        assert!(!stored_whole, "{what}: tile {tile}");
                    }
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 5 * 6 * 6);
    }

    #[test]
    fn a_wave_tail_is_exactly_the_last_grouped_tiles_and_saves_a_wave() {
        let mut tails = 0;
        for sms in [7, 16, 132] {
            for blocks_per_sm in [1, 2] {
                for tiles_m in 1..40 {
                    for tiles_n in 1..40 {
                        let (rows, cols) = (128, 64);
                        // A partial last tile row and column, as at odd shapes.
                        let dims = (tiles_m * rows - 5, 4096, tiles_n * cols - 3);
                        let plan =
                            FastSchedule::plan(dims, (rows, cols), sms, blocks_per_sm, true, None);
                        let FastSchedule::WaveTail(tail) = plan else {
                            continue;
                        };
                        tails += 1;
                        let tiles = tiles_m * tiles_n;
                        let resident = sms * blocks_per_sm;
                        let what = format!("{tiles_m}×{tiles_n} tiles, {resident} resident");
                        assert_eq!(tail.first_tile + tail.tiles, tiles, "{what}");
                        assert_eq!(
                            tail.first_tile.div_ceil(resident),
                            tiles / resident,
                            "{what}"
                        );
                        assert!(tiles / resident <= CUDA_WAVE_TAIL_MAX_WAVES, "{what}");
                        assert!(tail.slices >= CUDA_WAVE_TAIL_MIN_SLICES, "{what}");
                        assert!(tail.slices * tail.tiles <= resident, "{what}");
                        let (top, left) = tail.origin;
                        assert_eq!((tiles_m - top) * (tiles_n - left), tail.tiles, "{what}");
                        for id in 0..tiles {
                            let (row, col) = grouped_tile(id, (tiles_m, tiles_n));
                            let in_rectangle = row >= top && col >= left;
                            assert_eq!(in_rectangle, id >= tail.first_tile, "{what}, id {id}");
                        }
                    }
                }
            }
        }
        assert!(tails > 100, "only {tails} shapes had a wave tail");
    }
}
