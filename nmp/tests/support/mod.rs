//! The layout the pool's functional and link tests share.

use nmpsim_nmp::{Layout, LayoutParams, Placement, StateWidth, TableShape};

/// A layout of `shapes` over `ranks` ranks of 1 GiB, for up to 64 bags and
/// 1024 unique rows.
pub fn layout(
    placement: Placement,
    ranks: u32,
    shapes: &[TableShape],
    state: StateWidth,
) -> Layout {
    Layout::new(
        placement,
        shapes,
        LayoutParams {
            ranks,
            rank_capacity_bytes: 1 << 30,
            state_values_per_row: state,
            max_bags: 64,
            max_unique: 1024,
        },
    )
    .unwrap()
}
