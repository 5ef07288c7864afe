//! Unit tests of the engine's parts: the timing table, the queue-size
//! limits, the candidate shortcut of `enqueue`, the command queues, the
//! transaction lists, the completion rings and the address decoding.
use super::cmd_queue::{WRITE_TAG, remove_bit};
use super::lanes::lane;
use super::txn_queue::{NO_IDS, Txn};
use super::*;

#[test]
fn timing_table_of_ddr4_3200() {
    let c = DramConfig::preset("DDR4-3200-x8").unwrap();
    let t = TimingTable::of(&c);
    assert_eq!(t.read_delay, 26);
    assert_eq!(t.rd_to_rd_l, 8);
    assert_eq!(t.rd_to_rd_s, 4);
    assert_eq!(t.rd_to_wr, 22 + 4 - 16 + 2);
    assert_eq!(t.wr_to_rd_l, 16 + 4 + 12);
    assert_eq!(t.wr_to_pre, 16 + 4 + 24);
    assert_eq!(t.wr_to_wr_o, 6);
    assert_eq!(t.faw, 34);
}

#[test]
fn queue_sizes_beyond_its_masks_are_refused() {
    let mut c = DramConfig::preset("DDR4-3200-x8").unwrap();
    c.command_queue = 65;
    let e = NativeEngine::new(&c).err().expect("refused").to_string();
    assert!(e.contains("bank command queue 65"), "{e}");
    c.command_queue = 64;
    c.transaction_queue = 1 << 16;
    assert!(NativeEngine::new(&c).is_ok());
    c.transaction_queue = (1 << 16) + 1;
    assert!(NativeEngine::new(&c).is_err());
    let mut c = DramConfig::preset("DDR4-3200-x8").unwrap();
    c.org.banks_per_group = 2;
    let e = NativeEngine::new(&c).err().expect("refused").to_string();
    assert!(e.contains("2 or 4 bank groups of 4 banks"), "{e}");
}

fn txn(addr: u64, queue: u8, write: bool) -> Txn {
    Txn {
        addr,
        row: (addr >> 20) as u32,
        queue,
        write,
        ids: NO_IDS,
    }
}

/// A small random generator for the test below.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn entries_that_change_nothing_leave_the_candidates_exact() {
    // `enqueue` skips the queue's re-analysis for an entry behind others
    // that misses the open row or is a read hit behind an earlier read
    // hit. Whatever it skipped, the head analysis, the lanes and `ready`
    // must be what a full re-analysis gives. Queue states are built entry
    // by entry with the full re-analysis, from three rows and three
    // columns, so that hits, misses and reads ahead of writes to their
    // address all occur.
    let cfg = DramConfig::preset("DDR4-3200-x8").unwrap();
    let mut rng = Lcg(7);
    let (mut skipped, mut analysed) = (0, 0);
    for _ in 0..20_000 {
        let mut e = NativeEngine::new(&cfg).unwrap();
        let q = rng.next(16) as usize;
        let b = &mut e.banks[q];
        b.open_row = if rng.next(3) == 0 {
            CLOSED
        } else {
            rng.next(3) as u32
        };
        b.hits = rng.next(6) as u32;
        (b.act, b.pre, b.rd, b.wr) = (
            rng.next(40) as i32,
            rng.next(40) as i32,
            rng.next(40) as i32,
            rng.next(40) as i32,
        );
        for g in [&mut e.lanes.g_act, &mut e.lanes.g_rd, &mut e.lanes.g_wr] {
            g[q / W].0[q % W] = rng.next(40) as i32;
        }
        let entry = |rng: &mut Lcg| {
            let row = rng.next(3) as u32;
            Txn {
                addr: (row as u64) << 20 | rng.next(3) << 6,
                row,
                queue: q as u8,
                write: rng.next(3) == 0,
                ids: NO_IDS,
            }
        };
        let n = rng.next(e.cmd_cap as u64) as usize;
        for _ in 0..n {
            let t = entry(&mut rng);
            let hit = t.row == e.banks[q].open_row;
            e.cq.push(q, &t, hit);
            e.nonempty |= 1 << q;
            let r = e.refresh_head(q);
            e.set_ready(q, r);
        }
        let t = entry(&mut rng);
        let hit = t.row == e.banks[q].open_row;
        let reads_hit = e.cq.hit[q] & !e.cq.wr[q];
        if n != 0 && (!hit || (!t.write && reads_hit != 0)) {
            skipped += 1;
        } else {
            analysed += 1;
        }
        let ready = e.enqueue(&t);
        e.set_ready(q, ready);
        let head = e.head[q];
        let l = &*e.lanes;
        let lanes =
            |l: &Lanes| [&l.e_act, &l.e_pre, &l.e_rd, &l.e_wr, &l.ready].map(|v| lane(v, q));
        let before = lanes(l);
        let full = e.refresh_head(q);
        assert_eq!(ready, full, "ready after {n} entries");
        assert_eq!(head, e.head[q], "head analysis after {n} entries");
        e.set_ready(q, full);
        assert_eq!(before, lanes(&e.lanes), "lanes after {n} entries");
    }
    // Both paths were taken often.
    assert!(skipped > 2_000 && analysed > 2_000, "{skipped} {analysed}");
}

#[test]
fn remove_bit_closes_the_gap() {
    assert_eq!(remove_bit(0b1011_0110, 0), 0b101_1011);
    assert_eq!(remove_bit(0b1011_0110, 2), 0b101_1010);
    assert_eq!(remove_bit(0b1011_0110, 7), 0b011_0110);
    assert_eq!(remove_bit(u64::MAX, 63), u64::MAX >> 1);
}

#[test]
fn command_queues_keep_arrival_order_across_the_ring() {
    let mut cq = CmdQueues::new(2, 6); // rings of 8 slots
    let addr = |k: u64| k * 64;
    // Wrap the ring of queue 1: push and take from the head a few times.
    for k in 0..5 {
        cq.push(1, &txn(addr(k), 1, false), false);
        assert_eq!(cq.take(1, 0).0, addr(k));
    }
    for k in 10..16 {
        cq.push(1, &txn(addr(k), 1, k % 2 == 0), k % 3 == 0);
    }
    assert_eq!(cq.len(1), 6);
    assert_eq!(cq.wr[1], 0b01_0101);
    assert_eq!(cq.hit[1], 0b10_0100);
    // A write is found only under its tag, a read only untagged.
    assert!(cq.find(1, addr(10) | WRITE_TAG).is_some());
    assert!(cq.find(1, addr(10)).is_none());
    assert!(cq.find(1, addr(11)).is_some());
    assert!(cq.find(0, addr(11)).is_none());
    // Taking from the middle shifts the later entries forward.
    let (a, w, _) = cq.take(1, 2);
    assert_eq!((a, w), (addr(12), true));
    let order: Vec<u64> = (0..cq.len(1)).map(|i| cq.addr(1, i)).collect();
    assert_eq!(order, [10, 11, 13, 14, 15].map(addr));
    assert_eq!(cq.wr[1], 0b0_1001);
    assert_eq!(cq.hit[1], 0b1_0000);
    assert!(
        cq.find(1, addr(12) | WRITE_TAG).is_none(),
        "a taken slot is empty"
    );
    cq.open(1, (addr(14) >> 20) as u32);
    assert_eq!(cq.hit[1], 0b1_1111, "every entry is in row 0");
}

#[test]
fn row_hit_masks_follow_the_ring_and_pop_back_undoes_push() {
    // The hit mask of a newly opened row is computed over the ring's
    // slots and rotated into queue order: check it against the entries
    // one by one, for every ring size the engine takes (the 8-slot ring
    // has a vector path) and every position of the head.
    for cap in [1usize, 2, 3, 6, 8, 16, 33, 64] {
        let mut cq = CmdQueues::new(2, cap);
        let slots = cap.next_power_of_two();
        for turn in 0..slots {
            for n in [0, 1, cap / 2, cap] {
                let rows: Vec<u64> = (0..n as u64).map(|k| (k * 7 + turn as u64) % 3).collect();
                for (k, &row) in rows.iter().enumerate() {
                    cq.push(1, &txn(row << 20 | (k as u64) << 6, 1, k % 2 == 1), false);
                }
                for row in 0..4u32 {
                    cq.open(1, row);
                    let want = (0..n).fold(0u64, |m, i| m | ((cq.row(1, i) == row) as u64) << i);
                    assert_eq!(
                        cq.hit[1], want,
                        "ring of {slots}, head {turn}, {n} entries, row {row}"
                    );
                }
                // Undo the pushes from the back: masks and length return.
                for k in (0..n).rev() {
                    let wr_before = cq.wr[1];
                    let (addr, row, _) = cq.pop_back(1);
                    assert_eq!(addr, rows[k] << 20 | (k as u64) << 6);
                    assert_eq!(row as u64, rows[k]);
                    assert_eq!(cq.len(1), k);
                    assert_eq!(cq.wr[1], wr_before & !(1u64 << k));
                    assert_eq!(cq.hit[1] >> k, 0);
                }
                assert!(cq.find(1, rows.first().map_or(1, |r| r << 20)).is_none());
            }
            // Move the head on by one.
            cq.push(1, &txn(0, 1, false), false);
            cq.take(1, 0);
        }
    }
}

#[test]
fn transaction_lists_give_the_oldest_with_room() {
    let mut tq = TxnQueue::new(8);
    for (k, q) in [3u8, 5, 3, 7, 5].into_iter().enumerate() {
        tq.push(txn(k as u64 * 64, q, false));
    }
    assert_eq!(tq.len, 5);
    assert_eq!(tq.targets, 1 << 3 | 1 << 5 | 1 << 7);
    assert_eq!(tq.oldest(tq.targets), 3);
    assert_eq!(tq.oldest(1 << 5 | 1 << 7), 5);
    assert_eq!(tq.oldest(1 << 7), 7);
    assert_eq!(tq.find(5, 4 * 64), Some(4));
    assert_eq!(tq.find(3, 4 * 64), None);
    assert_eq!(tq.pop(3).addr, 0);
    assert_eq!(
        tq.oldest(tq.targets),
        5,
        "bank 5's head arrived before bank 3's"
    );
    assert_eq!(tq.pop(5).addr, 64);
    assert_eq!(tq.pop(3).addr, 128);
    assert_eq!(tq.targets, 1 << 5 | 1 << 7);
    // Freed slots are reused.
    for k in 0..5 {
        tq.push(txn(1000 + k * 64, 1, false));
    }
    assert_eq!(tq.len, 7);
    assert_eq!(tq.oldest(1 << 1 | 1 << 5), 5);
}

#[test]
fn completion_rings_grow_in_order() {
    let mut r = DoneRing::new(16);
    let mut done = Vec::new();
    for k in 0..10 {
        r.push(k, k);
    }
    assert_eq!(r.drain_due(3, &mut done), 4);
    for k in 10..40 {
        r.push(k, k);
    }
    assert_eq!(r.first_cycle(), 4);
    assert_eq!(r.drain_due(100, &mut done), 36);
    assert_eq!(r.first_cycle(), u64::MAX);
    let ids: Vec<u64> = done.iter().map(|c| c.id).collect();
    assert_eq!(ids, (0..40).collect::<Vec<_>>());
    assert!(done[..4].iter().all(|c| c.cycle == 3));
}

#[test]
fn fast_decode_equals_the_config() {
    for name in ["DDR4-3200-x8", "DDR4-2400-x16-2R", "DDR4-2400-x4-4R"] {
        let c = DramConfig::preset(name).unwrap();
        let e = NativeEngine::new(&c).unwrap();
        let mut x = 99u64;
        for _ in 0..1000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let addr = ((x >> 7) % c.capacity_bytes()) & !63;
            let d = c.decode(addr);
            let t = e.decode(addr);
            let q = (d.rank * c.org.banks() as u64
                + d.bankgroup * c.org.banks_per_group as u64
                + d.bank) as u8;
            assert_eq!((t.row as u64, t.queue), (d.row, q), "{name} {addr:#x}");
        }
    }
}
