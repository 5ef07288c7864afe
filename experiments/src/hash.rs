//! A stable 64-bit hash (FNV-1a) of a run's resolved configuration.
//!
//! Stable means: the same bytes give the same hash on every machine, build
//! and Rust version, which `std`'s hashers do not promise. It names run
//! directories and decides whether a finished run can be reused, so it must
//! never change for an unchanged configuration.

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a over a sequence of byte strings, each followed by a 0 byte so that
/// `["ab", "c"]` and `["a", "bc"]` differ.
pub fn fnv1a64<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    let mut h = OFFSET;
    for p in parts {
        for &b in p.iter().chain(std::iter::once(&0u8)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(PRIME);
        }
    }
    h
}

/// 16 lowercase hex digits.
pub fn hex(h: u64) -> String {
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_never_change() {
        // FNV-1a 64 of the empty input is the offset basis; of "a" (+ separator)
        // a fixed value. These pin the function: changing it would orphan every
        // existing run directory.
        assert_eq!(fnv1a64(std::iter::empty()), OFFSET);
        assert_eq!(hex(fnv1a64([b"a".as_slice()])), "089be207b544f1e4");
    }

    #[test]
    fn separators_matter() {
        let a = fnv1a64([b"ab".as_slice(), b"c".as_slice()]);
        let b = fnv1a64([b"a".as_slice(), b"bc".as_slice()]);
        assert_ne!(a, b);
    }
}
