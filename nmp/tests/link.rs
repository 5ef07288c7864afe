//! What each rank sends to the host link (`docs/nmp-isa.md`, "Host-link
//! bytes"), instruction by instruction and through the timed pool.

use nmpsim_kernels::Optimizer;
use nmpsim_nmp::{Instruction, Layout, LayoutParams, Placement, StateWidth, TableShape, rank_work};

fn layout(placement: Placement, ranks: u32, shapes: &[TableShape], state: StateWidth) -> Layout {
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

fn link_out(l: &Layout, instr: &Instruction, coal: &[u32]) -> Vec<u64> {
    (0..l.ranks())
        .map(|k| rank_work(l, instr, k, coal).link_out_bytes)
        .collect()
}

#[test]
fn row_wise_adagrad_exchanges_only_between_the_ranks_of_a_row() {
    let scatter = Instruction::Scatter {
        table: 0,
        optimizer: Optimizer::RowWiseAdagrad { lr: 0.1, eps: 1e-8 },
    };
    let coal: Vec<u32> = vec![1, 5, 17, 40, 99];
    let n = coal.len() as u64;
    // (placement, ranks, dim, bytes each rank sends per coalesced row)
    let cases: &[(Placement, u32, usize, &[u64])] = &[
        // A row on one rank exchanges nothing.
        (Placement::VectorSliced, 1, 64, &[0]),
        (Placement::RowInterleaved, 8, 64, &[0; 8]),
        (Placement::TablePerRank, 8, 64, &[0; 8]),
        (Placement::RowInterleaved, 1, 20, &[0]),
        // Slices 0..3 on ranks 0,1,0,1: every hop of the ring crosses ranks;
        // rank 0 (slice 0, the state) also sends the step.
        (Placement::VectorSliced, 2, 64, &[12, 8]),
        // Ranks 0,1,2,0: the last hop stays on rank 0.
        (Placement::VectorSliced, 3, 64, &[8, 4, 4]),
        // Four slices on four of eight ranks.
        (Placement::VectorSliced, 8, 64, &[8, 4, 4, 4, 0, 0, 0, 0]),
        // Two slices (dim 20) on two of eight ranks.
        (Placement::VectorSliced, 8, 20, &[8, 4, 0, 0, 0, 0, 0, 0]),
    ];
    for &(placement, ranks, dim, per_row) in cases {
        let l = layout(
            placement,
            ranks,
            &[TableShape { rows: 100, dim }],
            StateWidth::PerRow,
        );
        let want: Vec<u64> = per_row.iter().map(|b| b * n).collect();
        assert_eq!(
            link_out(&l, &scatter, &coal),
            want,
            "{placement}, {ranks} ranks, dim {dim}"
        );
    }
    // Other optimizers exchange nothing whatever the placement.
    for optimizer in [
        Optimizer::Sgd { lr: 0.1 },
        Optimizer::Adagrad {
            lr: 0.1,
            eps: 1e-8,
            initial_accumulator: 0.0,
        },
    ] {
        let state = StateWidth::of(&optimizer);
        let l = layout(
            Placement::VectorSliced,
            2,
            &[TableShape { rows: 100, dim: 64 }],
            state,
        );
        let s = Instruction::Scatter {
            table: 0,
            optimizer,
        };
        assert_eq!(link_out(&l, &s, &coal), vec![0, 0], "{}", optimizer.name());
    }
}
