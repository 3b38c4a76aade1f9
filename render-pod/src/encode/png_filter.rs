//! PNG row filters: each predicts every byte from its neighbours, left (a, the same channel of
//! the previous pixel), above (b) and above-left (c), and keeps only the difference, which is
//! mostly small or zero on rendered pages and so compresses well. Bytes left of the row and the
//! row above the first are zeros. Encoding only reads unfiltered bytes, so every filter is a
//! plain pass without branches per byte, which the compiler vectorises.

/// A PNG row filter type (PNG specification, section 9.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// The bytes as they are.
    None,
    /// Difference from the left.
    Sub,
    /// Difference from above.
    Up,
    /// Difference from the mean of left and above.
    Average,
    /// Difference from whichever of left, above and above-left is closest to left + above -
    /// above-left.
    Paeth,
}

impl Filter {
    /// The filter type byte that starts each filtered row.
    pub fn type_byte(self) -> u8 {
        match self {
            Filter::None => 0,
            Filter::Sub => 1,
            Filter::Up => 2,
            Filter::Average => 3,
            Filter::Paeth => 4,
        }
    }

    /// Writes the type byte then `row` filtered against `prev` (the row above, zeros for the
    /// first row) to `out`, which is one byte longer than `row`; `bpp` is bytes per pixel.
    /// Always inlined, so that a caller compiled for wider vectors gets them here too.
    #[inline(always)]
    pub fn apply(self, prev: &[u8], row: &[u8], bpp: usize, out: &mut [u8]) {
        assert!(prev.len() == row.len() && out.len() == row.len() + 1 && bpp > 0);
        out[0] = self.type_byte();
        let out = &mut out[1..];
        // The first pixel has nothing on its left (a = c = 0): every filter but Sub reduces to
        // a prediction from above there, Sub to none.
        let first = bpp.min(row.len());
        for i in 0..first {
            out[i] = match self {
                Filter::None | Filter::Sub => row[i],
                Filter::Up | Filter::Paeth => row[i].wrapping_sub(prev[i]),
                Filter::Average => row[i].wrapping_sub(prev[i] >> 1),
            };
        }
        // Equal-length views of x, a, b, c and the output, so the loops need no bounds checks.
        let n = row.len() - first;
        let (x, a) = (&row[first..], &row[..n]);
        let (b, c) = (&prev[first..], &prev[..n]);
        let out = &mut out[first..];
        match self {
            Filter::None => out.copy_from_slice(x),
            Filter::Sub => each(out, x, a, b, c, |x, a, _, _| x.wrapping_sub(a)),
            Filter::Up => each(out, x, a, b, c, |x, _, b, _| x.wrapping_sub(b)),
            Filter::Average => each(out, x, a, b, c, |x, a, b, _| x.wrapping_sub(mean(a, b))),
            Filter::Paeth => each(out, x, a, b, c, |x, a, b, c| x.wrapping_sub(paeth(a, b, c))),
        }
    }
}

/// out[i] = f(x[i], a[i], b[i], c[i]) over slices of one length.
#[inline(always)]
fn each(out: &mut [u8], x: &[u8], a: &[u8], b: &[u8], c: &[u8], f: impl Fn(u8, u8, u8, u8) -> u8) {
    let n = out.len();
    let (x, a, b, c) = (&x[..n], &a[..n], &b[..n], &c[..n]);
    for i in 0..n {
        out[i] = f(x[i], a[i], b[i], c[i]);
    }
}

/// floor((a + b) / 2) without widening: the shared bits plus half the differing ones.
#[inline(always)]
fn mean(a: u8, b: u8) -> u8 {
    (a & b) + ((a ^ b) >> 1)
}

/// The Paeth predictor, as selects rather than the specification's if/else chain so that it
/// vectorises. With p = a + b - c: |p - a| = |b - c|, |p - b| = |a - c|, |p - c| = |a + b - 2c|;
/// ties go to a, then b.
#[inline(always)]
fn paeth(a: u8, b: u8, c: u8) -> u8 {
    let (a16, b16, c16) = (i16::from(a), i16::from(b), i16::from(c));
    let pa = (b16 - c16).abs();
    let pb = (a16 - c16).abs();
    let pc = (a16 + b16 - 2 * c16).abs();
    let (p_bc, bc) = if pb <= pc { (pb, b) } else { (pc, c) };
    if pa <= p_bc { a } else { bc }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// The predictor exactly as the PNG specification writes it.
    fn paeth_spec(a: u8, b: u8, c: u8) -> u8 {
        let p = i32::from(a) + i32::from(b) - i32::from(c);
        let pa = (p - i32::from(a)).abs();
        let pb = (p - i32::from(b)).abs();
        let pc = (p - i32::from(c)).abs();
        if pa <= pb && pa <= pc {
            a
        } else if pb <= pc {
            b
        } else {
            c
        }
    }

    /// Reverses `apply` as a decoder does, byte by byte from the specification.
    fn unfilter(prev: &[u8], filtered: &[u8], bpp: usize) -> Vec<u8> {
        let (kind, data) = (filtered[0], &filtered[1..]);
        let mut row = vec![0u8; data.len()];
        for i in 0..data.len() {
            let a = if i >= bpp { row[i - bpp] } else { 0 };
            let b = prev[i];
            let c = if i >= bpp { prev[i - bpp] } else { 0 };
            let predicted = match kind {
                0 => 0,
                1 => a,
                2 => b,
                3 => ((u16::from(a) + u16::from(b)) / 2) as u8,
                4 => paeth_spec(a, b, c),
                _ => panic!("filter type {kind}"),
            };
            row[i] = data[i].wrapping_add(predicted);
        }
        row
    }

    #[test]
    fn paeth_matches_the_specification_everywhere() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                for c in 0..=255u8 {
                    assert_eq!(paeth(a, b, c), paeth_spec(a, b, c), "a={a} b={b} c={c}");
                }
            }
        }
    }

    #[test]
    fn mean_rounds_down() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(u16::from(mean(a, b)), (u16::from(a) + u16::from(b)) / 2);
            }
        }
    }

    #[test]
    fn every_filter_reverses_exactly() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 32) as u8
        };
        for filter in [Filter::None, Filter::Sub, Filter::Up, Filter::Average, Filter::Paeth] {
            for bpp in [1, 3, 4] {
                for pixels in [1, 2, 5, 33] {
                    let len = pixels * bpp;
                    let prev: Vec<u8> = (0..len).map(|_| next()).collect();
                    let row: Vec<u8> = (0..len).map(|_| next()).collect();
                    let mut out = vec![0; len + 1];
                    filter.apply(&prev, &row, bpp, &mut out);
                    assert_eq!(out[0], filter.type_byte());
                    assert_eq!(unfilter(&prev, &out, bpp), row, "{filter:?} bpp {bpp} x{pixels}");
                }
            }
        }
    }
}
