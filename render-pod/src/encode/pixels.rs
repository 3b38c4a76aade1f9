//! Pixel layout conversions of a rendered RGBA page, and the cheap "has colour?" test.

/// Bytes per pixel of a PDFium render (RGBA, opaque: pages are rendered onto white).
pub const RGBA: usize = 4;

/// Pixels per block of `gray_if_neutral`: small enough that a colour page stops early, big
/// enough that the per-block test costs nothing.
const BLOCK: usize = 1024;

/// The page as 8-bit grey when every pixel is neutral (R = G = B), else `None`. Text pages, the
/// common case, get their grey plane for about the price of a copy; colour pages stop at the
/// first block with colour.
pub fn gray_if_neutral(rgba: &[u8]) -> Option<Vec<u8>> {
    let mut gray = vec![0u8; rgba.len() / RGBA];
    for (out, block) in gray.chunks_mut(BLOCK).zip(rgba.chunks(BLOCK * RGBA)) {
        if !rgba_to_gray_if_neutral(block, out) {
            return None;
        }
    }
    Some(gray)
}

/// Writes the red byte of each RGBA pixel to `gray` (one byte per pixel) and tells whether all
/// the pixels were neutral, i.e. whether `gray` holds them exactly.
#[inline(always)]
pub fn rgba_to_gray_if_neutral(rgba: &[u8], gray: &mut [u8]) -> bool {
    debug_assert_eq!(rgba.len(), gray.len() * RGBA);
    let mut colour = 0u32;
    for (g, p) in gray.iter_mut().zip(rgba.chunks_exact(RGBA)) {
        let w = u32::from_le_bytes([p[0], p[1], p[2], p[3]]);
        // R copied into G and B, compared with the pixel: whole 32-bit lanes, which vectorise
        // (testing R^G and G^B byte by byte measured twice as slow).
        let r = w & 0xFF;
        colour |= (w & 0x00FF_FFFF) ^ (r | r << 8 | r << 16);
        *g = w as u8;
    }
    colour == 0
}

/// Drops the alpha byte of each pixel (always opaque here): `rgb` holds 3 bytes per pixel.
#[inline(always)]
pub fn rgba_to_rgb(rgba: &[u8], rgb: &mut [u8]) {
    debug_assert_eq!(rgba.len() / RGBA * 3, rgb.len());
    // Four pixels (16 bytes in, 12 out) at a time in 64-bit words: a per-pixel 3-byte copy does
    // not vectorise and measured half again as slow.
    let mut out = rgb.chunks_exact_mut(12);
    let mut pixels = rgba.chunks_exact(16);
    for (o, p) in (&mut out).zip(&mut pixels) {
        let lo = u64::from_le_bytes([p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]]);
        let hi = u64::from_le_bytes([p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15]]);
        // lo = pixels 0 and 1, hi = pixels 2 and 3, each pixel A B G R from the top byte down.
        let first = (lo & 0xFF_FFFF) | ((lo >> 8) & 0xFFFF_FF00_0000) | (hi << 48);
        let last = ((hi >> 16) & 0xFF) | ((hi >> 24) & 0xFFFF_FF00);
        o[..8].copy_from_slice(&first.to_le_bytes());
        o[8..].copy_from_slice(&(last as u32).to_le_bytes());
    }
    for (o, p) in
        out.into_remainder().chunks_exact_mut(3).zip(pixels.remainder().chunks_exact(RGBA))
    {
        o.copy_from_slice(&p[..3]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neutral_pixels_become_gray() {
        let rgba = [0, 0, 0, 255, 128, 128, 128, 255, 255, 255, 255, 255];
        assert_eq!(gray_if_neutral(&rgba), Some(vec![0, 128, 255]));
        let mut gray = [9; 3];
        assert!(rgba_to_gray_if_neutral(&rgba, &mut gray));
        assert_eq!(gray, [0, 128, 255]);
    }

    #[test]
    fn one_coloured_pixel_means_colour() {
        for channel in [0, 1, 2] {
            let mut rgba = vec![200u8; 4 * 5000];
            rgba[4 * 4999 + channel] = 201;
            assert_eq!(gray_if_neutral(&rgba), None);
            let mut gray = vec![0; 5000];
            assert!(!rgba_to_gray_if_neutral(&rgba, &mut gray));
        }
        // Alpha is not colour.
        let rgba = [10, 10, 10, 0, 20, 20, 20, 255];
        assert_eq!(gray_if_neutral(&rgba), Some(vec![10, 20]));
    }

    #[test]
    fn rgb_drops_alpha() {
        // Every length around the four-pixel step, with distinct bytes.
        for pixels in 0..=9 {
            let rgba: Vec<u8> = (0..pixels * 4).map(|i| i as u8).collect();
            let mut rgb = vec![0; pixels * 3];
            rgba_to_rgb(&rgba, &mut rgb);
            let expected: Vec<u8> = rgba.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
            assert_eq!(rgb, expected);
        }
    }
}
