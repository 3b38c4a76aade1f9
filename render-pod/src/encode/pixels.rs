//! Pixel layout conversions of a rendered page, and the cheap "has colour?" test. Renders are
//! BGRA, PDFium's own byte order: asking PDFium for RGBA costs it a conversion pass over the
//! whole bitmap (measured 1.0-1.6 ms of a 3 ms render), while the swap is free here, folded
//! into the conversion each encoder needs anyway.

/// Bytes per pixel of a PDFium render (BGRA, opaque: pages are rendered onto white).
pub const BGRA: usize = 4;

/// Pixels per block of `gray_if_neutral`: small enough that a colour page stops early, big
/// enough that the per-block test costs nothing.
const BLOCK: usize = 1024;

/// The page as 8-bit grey when every pixel is neutral (R = G = B), else `None`. Text pages, the
/// common case, get their grey plane for about the price of a copy; colour pages stop at the
/// first block with colour.
pub fn gray_if_neutral(bgra: &[u8]) -> Option<Vec<u8>> {
    let mut gray = vec![0u8; bgra.len() / BGRA];
    for (out, block) in gray.chunks_mut(BLOCK).zip(bgra.chunks(BLOCK * BGRA)) {
        if !bgra_to_gray_if_neutral(block, out) {
            return None;
        }
    }
    Some(gray)
}

/// Writes the blue byte of each BGRA pixel to `gray` (one byte per pixel) and tells whether all
/// the pixels were neutral, i.e. whether `gray` holds them exactly.
#[inline(always)]
pub fn bgra_to_gray_if_neutral(bgra: &[u8], gray: &mut [u8]) -> bool {
    debug_assert_eq!(bgra.len(), gray.len() * BGRA);
    let mut colour = 0u32;
    for (g, p) in gray.iter_mut().zip(bgra.chunks_exact(BGRA)) {
        let w = u32::from_le_bytes([p[0], p[1], p[2], p[3]]);
        // B copied into G and R, compared with the pixel: whole 32-bit lanes, which vectorise
        // (testing B^G and G^R byte by byte measured twice as slow).
        let b = w & 0xFF;
        colour |= (w & 0x00FF_FFFF) ^ (b | b << 8 | b << 16);
        *g = w as u8;
    }
    colour == 0
}

/// A BGRA pixel (little-endian word) as R | G << 8 | B << 16: a byte swap and a shift, which
/// vectorise to one shuffle.
#[inline(always)]
fn rgb_word(bgra: u32) -> u32 {
    bgra.swap_bytes() >> 8
}

/// Writes each BGRA pixel as RGB (alpha is always opaque here): `rgb` holds 3 bytes per pixel.
#[inline(always)]
pub fn bgra_to_rgb(bgra: &[u8], rgb: &mut [u8]) {
    debug_assert_eq!(bgra.len() / BGRA * 3, rgb.len());
    // Four pixels (16 bytes in, 12 out) at a time in 64-bit words: a per-pixel 3-byte copy does
    // not vectorise and measured half again as slow.
    let mut out = rgb.chunks_exact_mut(12);
    let mut pixels = bgra.chunks_exact(16);
    for (o, p) in (&mut out).zip(&mut pixels) {
        let px = |i: usize| rgb_word(u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]));
        let (a, b, c, d) = (u64::from(px(0)), u64::from(px(4)), u64::from(px(8)), px(12));
        let first = a | b << 24 | c << 48;
        let last = (c >> 16) as u32 | d << 8;
        o[..8].copy_from_slice(&first.to_le_bytes());
        o[8..].copy_from_slice(&last.to_le_bytes());
    }
    for (o, p) in
        out.into_remainder().chunks_exact_mut(3).zip(pixels.remainder().chunks_exact(BGRA))
    {
        o.copy_from_slice(&[p[2], p[1], p[0]]);
    }
}

/// The page as RGBA, for an encoder that takes no other four-byte order.
pub fn bgra_to_rgba(bgra: &[u8]) -> Vec<u8> {
    // A copy (no zeroing first) and a swap in place, whole 32-bit pixels through the same
    // shuffle as `bgra_to_rgb`: measured twice as fast as filling a zeroed buffer.
    let mut rgba = bgra.to_vec();
    for p in rgba.chunks_exact_mut(BGRA) {
        let w = u32::from_le_bytes([p[0], p[1], p[2], p[3]]);
        p.copy_from_slice(&(rgb_word(w) | (w & 0xFF00_0000)).to_le_bytes());
    }
    rgba
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neutral_pixels_become_gray() {
        let bgra = [0, 0, 0, 255, 128, 128, 128, 255, 255, 255, 255, 255];
        assert_eq!(gray_if_neutral(&bgra), Some(vec![0, 128, 255]));
        let mut gray = [9; 3];
        assert!(bgra_to_gray_if_neutral(&bgra, &mut gray));
        assert_eq!(gray, [0, 128, 255]);
    }

    #[test]
    fn one_coloured_pixel_means_colour() {
        for channel in [0, 1, 2] {
            let mut bgra = vec![200u8; 4 * 5000];
            assert_eq!(gray_if_neutral(&bgra), Some(vec![200; 5000]));
            bgra[4 * 4999 + channel] = 201;
            assert_eq!(gray_if_neutral(&bgra), None);
            let mut gray = vec![0; 5000];
            assert!(!bgra_to_gray_if_neutral(&bgra, &mut gray));
        }
        // Alpha is not colour.
        let bgra = [10, 10, 10, 0, 20, 20, 20, 255];
        assert_eq!(gray_if_neutral(&bgra), Some(vec![10, 20]));
    }

    #[test]
    fn rgb_swaps_blue_and_red_and_drops_alpha() {
        // Every length around the four-pixel step, with distinct bytes.
        for pixels in 0..=9 {
            let bgra: Vec<u8> = (0..pixels * 4).map(|i| i as u8).collect();
            let mut rgb = vec![0; pixels * 3];
            bgra_to_rgb(&bgra, &mut rgb);
            let expected: Vec<u8> = bgra.chunks_exact(4).flat_map(|p| [p[2], p[1], p[0]]).collect();
            assert_eq!(rgb, expected);
        }
    }

    #[test]
    fn rgba_swaps_blue_and_red_and_keeps_alpha() {
        assert_eq!(bgra_to_rgba(&[1, 2, 3, 4, 5, 6, 7, 8]), vec![3, 2, 1, 4, 7, 6, 5, 8]);
    }
}
