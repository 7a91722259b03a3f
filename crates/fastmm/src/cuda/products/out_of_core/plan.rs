//! How a GPU out-of-core product is cut and ordered: the tiles of C, the
//! panels of A and B, which operand stays on the GPU, how many buffers
//! ("slots") each operand gets, and the resulting list of uploads, products
//! and downloads with the dependencies between them. Pure arithmetic,
//! tested without a GPU; `pipeline` runs the schedule.
//!
//! Seed 003 §2.1 cuts A into row blocks of `a` rows and B into column
//! blocks of `b` columns, and its special case keeps B on the GPU while A
//! streams through, in (k(a + b) + ab)·sizeof(T) bytes per step. The plan
//! generalises it: B (or A, whichever moves fewer bytes) stays resident in
//! as many panels as the budget holds, the other operand streams through
//! two buffers, C tiles go through two buffers, and only when k is too
//! deep for any tile is k split as well.

use crate::cuda::tunables::{CUDA_OUT_OF_CORE_ALIGN, CUDA_OUT_OF_CORE_MIN_TILE};
use crate::error::Error;
use crate::system::format_bytes;

/// The operand whose panels stay on the GPU while the other streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resident {
    /// Column panels of B stay; row panels of A stream (the seed's case).
    B,
    /// Row panels of A stay; column panels of B stream.
    A,
}

/// GPU buffers per operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slots {
    /// Panels of A (a × kc each).
    pub a: usize,
    /// Panels of B (kc × b each).
    pub b: usize,
    /// Tiles of C (a × b each).
    pub c: usize,
}

/// The cut of an m×k×n product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tiling {
    /// (m, k, n).
    pub shape: (usize, usize, usize),
    /// Bytes per element.
    pub elem: usize,
    /// Rows of a C tile and of an A panel (a).
    pub tile_rows: usize,
    /// Columns of a C tile and of a B panel (b).
    pub tile_cols: usize,
    /// Depth of a panel (kc = k unless k is split).
    pub depth: usize,
    /// Which operand stays on the GPU.
    pub resident: Resident,
    /// Buffers per operand.
    pub slots: Slots,
}

/// A rectangle of an operand: (first row, first column, rows, columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// First row.
    pub row: usize,
    /// First column.
    pub col: usize,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
}

impl Block {
    /// Elements.
    pub fn elements(&self) -> usize {
        self.rows * self.cols
    }
}

/// Which input a transfer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// A, m×k.
    A,
    /// B, k×n.
    B,
}

/// A panel copied to the GPU into `slot`, after the product `after_task`
/// (the last reader of the slot's previous panel) is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Upload {
    /// A or B.
    pub operand: Operand,
    /// The panel.
    pub block: Block,
    /// Its GPU buffer among the operand's slots.
    pub slot: usize,
    /// The product (index into [`Schedule::tasks`]) to wait for.
    pub after_task: Option<usize>,
}

/// One product: the C tile `tile` (in its slot) ← (or +=, when
/// `accumulate`) A slot × B slot, whose panels came with the uploads
/// `a_upload` and `b_upload`. `last` products complete their tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    /// Index into [`Schedule::tiles`].
    pub tile: usize,
    /// The A panel's slot.
    pub a_slot: usize,
    /// The B panel's slot.
    pub b_slot: usize,
    /// The upload (index into [`Schedule::uploads`]) that brought A's panel.
    pub a_upload: usize,
    /// ...and B's.
    pub b_upload: usize,
    /// (rows, depth, columns) of this product.
    pub dims: (usize, usize, usize),
    /// Adds into the tile (a later slice of a split k).
    pub accumulate: bool,
    /// Completes the tile.
    pub last: bool,
}

/// A tile of C: its rectangle, its slot, and the tile before it in that
/// slot, whose download must be done before this tile's first product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tile {
    /// Its rectangle of C.
    pub block: Block,
    /// Its GPU buffer among C's slots.
    pub slot: usize,
    /// The previous tile in the slot (index into [`Schedule::tiles`]).
    pub after_tile: Option<usize>,
}

/// Every transfer and product of a plan, in issue order.
#[derive(Debug, Clone, Default)]
pub struct Schedule {
    /// Panel copies to the GPU, in issue order.
    pub uploads: Vec<Upload>,
    /// Products, in issue order.
    pub tasks: Vec<Task>,
    /// Tiles of C, in the order they finish (and are copied back).
    pub tiles: Vec<Tile>,
}

impl Schedule {
    /// Elements copied to the GPU.
    pub fn upload_elements(&self) -> u64 {
        self.uploads.iter().map(|u| u.block.elements() as u64).sum()
    }
}

/// `len` cut into parts of at most `max` (at least 1), as even as
/// possible with every part but the last a multiple of
/// [`CUDA_OUT_OF_CORE_ALIGN`] when `max` allows: (start, size) pairs.
pub fn split(len: usize, max: usize) -> Vec<(usize, usize)> {
    let max = max.max(1);
    let parts = len.div_ceil(max).max(1);
    let even = len.div_ceil(parts);
    let aligned = even.next_multiple_of(CUDA_OUT_OF_CORE_ALIGN);
    let step = if aligned <= max { aligned } else { even }.max(1);
    (0..len)
        .step_by(step)
        .map(|start| (start, step.min(len - start)))
        .collect()
}

impl Tiling {
    /// The plan for an m×k×n product of `elem`-byte elements in `budget`
    /// bytes of GPU memory, with C tiles of at most `max_tile` a side.
    ///
    /// Everything at once when A, B and C fit. Otherwise the largest tile
    /// edge (from `max_tile`, halving down to
    /// [`CUDA_OUT_OF_CORE_MIN_TILE`]) for which the streamed operand's two
    /// panels, two C tiles and at least one resident panel fit, with the
    /// resident operand (A or B) that moves fewer bytes; the resident
    /// operand gets as many panels as the rest of the budget holds (all of
    /// them when it fits). Failing that, k is split: 2 panels of A and B
    /// and 2 tiles of C of the smallest edge, as deep as fits.
    pub fn new(
        (m, k, n): (usize, usize, usize),
        elem: usize,
        budget: u64,
        max_tile: usize,
    ) -> Result<Tiling, Error> {
        if m == 0 || k == 0 || n == 0 {
            return Err(Error::InvalidOption(format!(
                "an out-of-core product needs m, k and n of at least 1, not {m}×{k}×{n}"
            )));
        }
        let words = budget / elem.max(1) as u64;
        let (m64, k64, n64) = (m as u64, k as u64, n as u64);
        let whole = Tiling::one_step((m, k, n), elem);
        if m64 * k64 + k64 * n64 + m64 * n64 <= words {
            return Ok(whole);
        }
        let mut edge = max_tile.max(CUDA_OUT_OF_CORE_MIN_TILE);
        loop {
            let (a, b) = (split(m, edge)[0].1, split(n, edge)[0].1);
            let (panels_a, panels_b) = (m.div_ceil(a), n.div_ceil(b));
            let c_slots = (panels_a * panels_b).min(2);
            let fixed_c = c_slots as u64 * (a * b) as u64;
            let mut best: Option<(u64, Tiling)> = None;
            for resident in [Resident::B, Resident::A] {
                let (resident_words, resident_count, streamed_words, streamed_count) =
                    match resident {
                        Resident::B => (k64 * b as u64, panels_b, k64 * a as u64, panels_a),
                        Resident::A => (k64 * a as u64, panels_a, k64 * b as u64, panels_b),
                    };
                let streamed_slots = streamed_count.min(2);
                let fixed = fixed_c + streamed_slots as u64 * streamed_words;
                if fixed >= words {
                    continue;
                }
                let resident_slots = ((words - fixed) / resident_words).min(resident_count as u64);
                if resident_slots == 0 {
                    continue;
                }
                let slots = match resident {
                    Resident::B => Slots {
                        a: streamed_slots,
                        b: resident_slots as usize,
                        c: c_slots,
                    },
                    Resident::A => Slots {
                        a: resident_slots as usize,
                        b: streamed_slots,
                        c: c_slots,
                    },
                };
                let plan = Tiling {
                    tile_rows: a,
                    tile_cols: b,
                    resident,
                    slots,
                    ..whole
                };
                let moved = plan.schedule().upload_elements();
                if best.as_ref().is_none_or(|(least, _)| moved < *least) {
                    best = Some((moved, plan));
                }
            }
            if let Some((_, plan)) = best {
                return Ok(plan);
            }
            if edge <= CUDA_OUT_OF_CORE_MIN_TILE {
                break;
            }
            edge = (edge / 2).max(CUDA_OUT_OF_CORE_MIN_TILE);
        }
        // k too deep for whole panels: split it.
        let (a, b) = (
            split(m, CUDA_OUT_OF_CORE_MIN_TILE)[0].1,
            split(n, CUDA_OUT_OF_CORE_MIN_TILE)[0].1,
        );
        let (a64, b64) = (a as u64, b as u64);
        let depth = words.saturating_sub(2 * a64 * b64) / (2 * (a64 + b64));
        if depth == 0 {
            return Err(Error::InvalidOption(format!(
                "a GPU budget of {} cannot hold two {a}×{b} tiles of C and one row of their panels; \
                 allow at least {}",
                format_bytes(budget.into()),
                format_bytes(((2 * a64 * b64 + 2 * (a64 + b64)) * elem as u64).into())
            )));
        }
        let depth = split(k, depth as usize)[0].1;
        Ok(Tiling {
            tile_rows: a,
            tile_cols: b,
            depth,
            resident: Resident::B,
            slots: Slots { a: 2, b: 2, c: 2 },
            ..whole
        })
    }

    /// The whole m×k×n product in one step: one buffer each for A, B, C.
    pub fn one_step((m, k, n): (usize, usize, usize), elem: usize) -> Tiling {
        Tiling {
            shape: (m, k, n),
            elem,
            tile_rows: m,
            tile_cols: n,
            depth: k,
            resident: Resident::B,
            slots: Slots { a: 1, b: 1, c: 1 },
        }
    }

    /// Refuses a plan that does not describe an m×k×n product of
    /// `elem`-byte elements: a zero or oversized tile, depth or slot count.
    pub fn check(&self, shape: (usize, usize, usize), elem: usize) -> Result<(), Error> {
        let (m, k, n) = shape;
        let fits = |part: usize, whole: usize| part >= 1 && part <= whole;
        let s = self.slots;
        if self.shape != shape
            || self.elem != elem
            || !fits(self.tile_rows, m)
            || !fits(self.tile_cols, n)
            || !fits(self.depth, k)
            || s.a == 0
            || s.b == 0
            || s.c == 0
        {
            return Err(Error::InvalidOption(format!(
                "{self:?} is not a plan for a {m}×{k}×{n} product of {elem}-byte elements"
            )));
        }
        Ok(())
    }

    /// GPU bytes of the plan's buffers.
    pub fn device_bytes(&self) -> u64 {
        let (a, b, kc) = (
            self.tile_rows as u64,
            self.tile_cols as u64,
            self.depth as u64,
        );
        let s = self.slots;
        (s.a as u64 * a * kc + s.b as u64 * kc * b + s.c as u64 * a * b) * self.elem as u64
    }

    /// Seed 003's memory of one step, (k(a + b) + ab)·sizeof(T), with k
    /// the panel depth.
    pub fn seed_formula_bytes(&self) -> u64 {
        let (a, b, kc) = (
            self.tile_rows as u64,
            self.tile_cols as u64,
            self.depth as u64,
        );
        (kc * (a + b) + a * b) * self.elem as u64
    }

    /// Whether the plan is the whole product in one step.
    #[cfg(test)]
    pub fn in_one_step(&self) -> bool {
        let (m, k, n) = self.shape;
        (self.tile_rows, self.depth, self.tile_cols) == (m, k, n)
    }

    /// A line for reports: tiles, residency, buffers.
    pub fn describe(&self) -> String {
        let (m, k, n) = self.shape;
        let (rows, cols, depth) = (self.tile_rows, self.tile_cols, self.depth);
        let tiles = m.div_ceil(rows) * n.div_ceil(cols);
        let resident = match self.resident {
            Resident::B => ("B", self.slots.b, n.div_ceil(cols)),
            Resident::A => ("A", self.slots.a, m.div_ceil(rows)),
        };
        let flow = if depth < k {
            format!(
                ", k in {} slices of {depth}; A and B streamed through {} and {} buffers",
                k.div_ceil(depth),
                self.slots.a,
                self.slots.b
            )
        } else {
            format!(
                "; {} resident in {} of its {} panels",
                resident.0, resident.1, resident.2
            )
        };
        format!(
            "{tiles} tiles of {rows}×{cols}{flow}; GPU buffers {} (the seed's (k(a+b)+ab)·size = {})",
            format_bytes(self.device_bytes().into()),
            format_bytes(self.seed_formula_bytes().into()),
        )
    }

    /// The uploads, products and tile downloads, in issue order.
    ///
    /// Products run tile by tile. Resident B: for each group of as many B
    /// panels as there are B slots, every row panel of A in turn against
    /// the group's panels; resident A is the mirror image. A panel is
    /// uploaded when a product first needs it and it is not in a slot,
    /// into the slots in turn, after the last product that read the
    /// slot's previous panel. C tiles take their slots in turn.
    pub fn schedule(&self) -> Schedule {
        let (m, k, n) = self.shape;
        let rows = split(m, self.tile_rows);
        let cols = split(n, self.tile_cols);
        let depths = split(k, self.depth);
        // (row panel, column panel) in product order.
        let mut order = Vec::with_capacity(rows.len() * cols.len());
        match self.resident {
            Resident::B => {
                for group in (0..cols.len())
                    .collect::<Vec<_>>()
                    .chunks(self.slots.b.max(1))
                {
                    for i in 0..rows.len() {
                        order.extend(group.iter().map(|&j| (i, j)));
                    }
                }
            }
            Resident::A => {
                for group in (0..rows.len())
                    .collect::<Vec<_>>()
                    .chunks(self.slots.a.max(1))
                {
                    for j in 0..cols.len() {
                        order.extend(group.iter().map(|&i| (i, j)));
                    }
                }
            }
        }
        let mut schedule = Schedule::default();
        let mut a_slots = SlotRing::new(self.slots.a);
        let mut b_slots = SlotRing::new(self.slots.b);
        let mut c_last_tile: Vec<Option<usize>> = vec![None; self.slots.c.max(1)];
        for (tile, &(i, j)) in order.iter().enumerate() {
            let ((row, height), (col, width)) = (rows[i], cols[j]);
            let slot = tile % c_last_tile.len();
            schedule.tiles.push(Tile {
                block: Block {
                    row,
                    col,
                    rows: height,
                    cols: width,
                },
                slot,
                after_tile: c_last_tile[slot].replace(tile),
            });
            for (p, &(depth_at, depth)) in depths.iter().enumerate() {
                let task = schedule.tasks.len();
                let a_block = Block {
                    row,
                    col: depth_at,
                    rows: height,
                    cols: depth,
                };
                let b_block = Block {
                    row: depth_at,
                    col,
                    rows: depth,
                    cols: width,
                };
                let (a_slot, a_upload) =
                    a_slots.place(Operand::A, a_block, task, &mut schedule.uploads);
                let (b_slot, b_upload) =
                    b_slots.place(Operand::B, b_block, task, &mut schedule.uploads);
                schedule.tasks.push(Task {
                    tile,
                    a_slot,
                    b_slot,
                    a_upload,
                    b_upload,
                    dims: (height, depth, width),
                    accumulate: p > 0,
                    last: p + 1 == depths.len(),
                });
            }
        }
        schedule
    }
}

/// The panels in one operand's slots, replaced in turn.
struct SlotRing {
    /// Per slot: (panel, the upload that brought it, its last reader).
    held: Vec<Option<(Block, usize, usize)>>,
    next: usize,
}

impl SlotRing {
    fn new(slots: usize) -> SlotRing {
        SlotRing {
            held: vec![None; slots.max(1)],
            next: 0,
        }
    }

    /// The slot holding `block` for product `task` and the upload that
    /// brought it there, adding that upload when the block is not held.
    fn place(
        &mut self,
        operand: Operand,
        block: Block,
        task: usize,
        uploads: &mut Vec<Upload>,
    ) -> (usize, usize) {
        if let Some(slot) = self
            .held
            .iter()
            .position(|h| h.is_some_and(|(b, _, _)| b == block))
        {
            let (_, upload, _) = self.held[slot].expect("found above");
            self.held[slot] = Some((block, upload, task));
            return (slot, upload);
        }
        let slot = self.next;
        self.next = (self.next + 1) % self.held.len();
        let upload = uploads.len();
        uploads.push(Upload {
            operand,
            block,
            slot,
            after_task: self.held[slot].map(|(_, _, reader)| reader),
        });
        self.held[slot] = Some((block, upload, task));
        (slot, upload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: u64 = 1_000_000_000;

    /// Replays a schedule on the CPU's idea of the slots and checks that
    /// every product reads the panels it needs, every C element is
    /// produced exactly once over the whole depth, no upload overwrites a
    /// panel before its last reader ran, and the buffers fit the budget.
    fn check(plan: &Tiling, budget: u64) -> Schedule {
        let (m, k, n) = plan.shape;
        assert!(
            plan.device_bytes() <= budget,
            "{plan:?} uses {} of {budget}",
            plan.device_bytes()
        );
        let s = plan.schedule();
        let mut a_held: Vec<Option<Block>> = vec![None; plan.slots.a];
        let mut b_held: Vec<Option<Block>> = vec![None; plan.slots.b];
        let mut applied = 0;
        let mut depth_done = vec![0usize; s.tiles.len()];
        let mut tile_done = vec![false; s.tiles.len()];
        for (t, task) in s.tasks.iter().enumerate() {
            // Uploads up to this task's have been issued; each upload's
            // wait is on an earlier product.
            while applied <= task.a_upload.max(task.b_upload) {
                let u = s.uploads[applied];
                if let Some(w) = u.after_task {
                    assert!(w < t, "upload {applied} waits for a later product");
                }
                match u.operand {
                    Operand::A => a_held[u.slot] = Some(u.block),
                    Operand::B => b_held[u.slot] = Some(u.block),
                }
                applied += 1;
            }
            let tile = s.tiles[task.tile];
            let (rows, depth, cols) = task.dims;
            let a = a_held[task.a_slot].expect("A panel present");
            let b = b_held[task.b_slot].expect("B panel present");
            assert_eq!(
                (a.row, a.rows, a.cols),
                (tile.block.row, rows, depth),
                "task {t}"
            );
            assert_eq!((b.col, b.cols, b.rows), (tile.block.col, cols, depth));
            assert_eq!(a.col, b.row, "the panels' depths match");
            assert_eq!(a.col, depth_done[task.tile], "depth slices in order");
            assert_eq!(task.accumulate, depth_done[task.tile] > 0);
            assert!(!tile_done[task.tile]);
            depth_done[task.tile] += depth;
            if task.last {
                assert_eq!(depth_done[task.tile], k);
                tile_done[task.tile] = true;
            }
            // A later upload into a slot read by this product must wait
            // for this product (or a later reader).
            for (later, u) in s.uploads.iter().enumerate().skip(applied) {
                let slot_read = match u.operand {
                    Operand::A => u.slot == task.a_slot,
                    Operand::B => u.slot == task.b_slot,
                };
                if slot_read {
                    assert!(
                        u.after_task.is_some_and(|w| w >= t),
                        "upload {later} may overwrite a panel product {t} reads"
                    );
                    break;
                }
            }
        }
        assert!(tile_done.iter().all(|&d| d));
        let mut covered = vec![0u8; m * n];
        for (i, tile) in s.tiles.iter().enumerate() {
            if let Some(before) = tile.after_tile {
                assert!(before < i && s.tiles[before].slot == tile.slot);
            }
            for r in tile.block.row..tile.block.row + tile.block.rows {
                for c in tile.block.col..tile.block.col + tile.block.cols {
                    covered[r * n + c] += 1;
                }
            }
        }
        assert!(covered.iter().all(|&c| c == 1), "every element of C once");
        s
    }

    #[test]
    fn splits_are_even_aligned_and_cover() {
        assert_eq!(split(90000, 8192).len(), 11);
        assert_eq!(split(90000, 8192)[0], (0, 8192));
        assert_eq!(split(90000, 8192)[10], (81920, 8080));
        assert_eq!(split(8200, 8192), vec![(0, 4224), (4224, 3976)]);
        assert_eq!(split(5, 2), vec![(0, 2), (2, 2), (4, 1)]);
        assert_eq!(split(1, 8192), vec![(0, 1)]);
        for (len, max) in [(1, 1), (7, 3), (1000, 128), (129, 128), (100_000, 4096)] {
            let parts = split(len, max);
            assert!(parts.iter().all(|&(_, s)| s <= max && s > 0));
            assert_eq!(parts.iter().map(|p| p.1).sum::<usize>(), len);
        }
    }

    #[test]
    fn a_product_that_fits_is_one_step() {
        let plan = Tiling::new((100, 200, 300), 4, 10 * GB, 8192).unwrap();
        assert!(plan.in_one_step());
        let s = check(&plan, 10 * GB);
        assert_eq!((s.uploads.len(), s.tasks.len(), s.tiles.len()), (2, 1, 1));
    }

    #[test]
    fn f32_at_90000_on_an_80_gb_card_keeps_b_and_streams_a_once() {
        let (n, budget) = (90_000, 78 * GB);
        let plan = Tiling::new((n, n, n), 4, budget, 8192).unwrap();
        assert_eq!(plan.resident, Resident::B);
        assert_eq!(
            (plan.tile_rows, plan.tile_cols, plan.depth),
            (8192, 8192, n)
        );
        assert_eq!(plan.slots, Slots { a: 2, b: 11, c: 2 });
        let s = plan.schedule();
        // A and B each cross the link once.
        assert_eq!(s.upload_elements(), 2 * (n * n) as u64);
        assert_eq!(s.tasks.len(), 121);
        // The seed's formula for one step: (k(a+b)+ab)·4.
        assert_eq!(
            plan.seed_formula_bytes(),
            (90_000 * (8192 + 8192) + 8192 * 8192) * 4
        );
    }

    #[test]
    fn a_small_budget_keeps_groups_of_panels_and_streams_the_other_operand_per_group() {
        let n = 90_000;
        let plan = Tiling::new((n, n, n), 4, 16 * GB, 8192).unwrap();
        assert_eq!(plan.tile_rows, 8192);
        assert_eq!(plan.slots.b, 3, "{plan:?}");
        let s = plan.schedule();
        // B once, A once per group of 3 of the 11 B panels.
        assert_eq!(s.upload_elements(), (n * n) as u64 * (1 + 4));
    }

    #[test]
    fn the_smaller_operand_stays_resident() {
        // A is 20000×20000 (1.6 GB), B 20000×100000 (8 GB), 8 GB of GPU
        // memory: all of A stays while B streams once; keeping B would
        // hold 10 of its 13 panels and stream A twice.
        let plan = Tiling::new((20_000, 20_000, 100_000), 4, 8 * GB, 8192).unwrap();
        assert_eq!(plan.resident, Resident::A, "{plan:?}");
        assert_eq!(plan.slots.a, 3);
        let s = plan.schedule();
        assert_eq!(s.upload_elements(), 20_000 * 20_000 + 20_000 * 100_000);
    }

    #[test]
    fn schedules_are_valid_over_shapes_and_budgets() {
        // Small shapes, budgets in elements of 4 bytes, tiles of 512..:
        // whole, resident B, resident A, groups, and split k.
        let shapes = [
            (1, 1, 1),
            (1, 5000, 1),
            (513, 700, 1025),
            (1500, 37, 2900),
            (3000, 2000, 700),
            (700, 2000, 3000),
            (2049, 4099, 1031),
            (3000, 3000, 8000),
        ];
        // Which kinds of plan the sweep reached: (one step, resident A,
        // resident panels fewer than all, k split).
        let mut kinds = std::collections::HashSet::new();
        for &(m, k, n) in &shapes {
            let total = (m * k + k * n + m * n) as u64 * 4;
            for divisor in [1, 2, 3, 5, 8, 20, 60] {
                let budget = total / divisor;
                let Ok(plan) = Tiling::new((m, k, n), 4, budget, 1024) else {
                    continue;
                };
                check(&plan, budget);
                let grouped = match plan.resident {
                    Resident::B => plan.slots.b < n.div_ceil(plan.tile_cols),
                    Resident::A => plan.slots.a < m.div_ceil(plan.tile_rows),
                };
                kinds.insert((
                    plan.in_one_step(),
                    plan.resident == Resident::A,
                    grouped,
                    plan.depth < k,
                ));
            }
        }
        for kind in [
            (true, false, false, false),
            (false, false, false, false),
            (false, true, false, false),
            (false, false, true, false),
            (false, false, false, true),
        ] {
            assert!(kinds.contains(&kind), "{kind:?} not reached: {kinds:?}");
        }
    }

    #[test]
    fn a_deep_k_is_split_and_accumulated() {
        // Two 512×512 tiles and 2·(512+512)·kc fit only for kc ≤ ~ 3500.
        let (m, k, n) = (1024, 100_000, 1024);
        let budget = (2 * 512 * 512 + 2 * 1024 * 3500) * 4;
        let plan = Tiling::new((m, k, n), 4, budget, 8192).unwrap();
        assert!(plan.depth < k && plan.depth <= 3500, "{plan:?}");
        let s = check(&plan, budget);
        assert!(s.tasks.iter().any(|t| t.accumulate));
    }

    #[test]
    fn a_budget_too_small_for_anything_is_an_error_naming_the_minimum() {
        let e = Tiling::new((4096, 4096, 4096), 4, 1 << 20, 8192).unwrap_err();
        assert!(e.to_string().contains("allow at least"), "{e}");
    }
}
