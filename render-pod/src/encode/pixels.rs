//! Pixel layout conversions of a rendered RGBA page, and the cheap "has colour?" test.

/// Bytes per pixel of a PDFium render (RGBA, opaque: pages are rendered onto white).
pub const RGBA: usize = 4;

/// The page as 8-bit grey when every pixel is neutral (R = G = B), else `None`. Text pages, the
/// common case, get their grey plane for about the price of a copy; colour pages stop at the
/// first block with colour. No branch per pixel, so the loop vectorises.
pub fn gray_if_neutral(rgba: &[u8]) -> Option<Vec<u8>> {
    const BLOCK: usize = 1024;
    let mut gray = vec![0u8; rgba.len() / RGBA];
    for (out, block) in gray.chunks_mut(BLOCK).zip(rgba.chunks(BLOCK * RGBA)) {
        let mut colour = 0u32;
        for (g, p) in out.iter_mut().zip(block.chunks_exact(RGBA)) {
            // Little-endian word: R in the low byte, then G, then B. The low 16 bits of
            // w ^ (w >> 8) are R^G and G^B: zero exactly when the pixel is neutral.
            let w = u32::from_le_bytes([p[0], p[1], p[2], p[3]]);
            colour |= (w ^ (w >> 8)) & 0xFFFF;
            *g = p[0];
        }
        if colour != 0 {
            return None;
        }
    }
    Some(gray)
}

/// Drops the alpha byte (always opaque here).
pub fn rgba_to_rgb(rgba: &[u8]) -> Vec<u8> {
    let mut rgb = vec![0u8; rgba.len() / RGBA * 3];
    for (out, p) in rgb.chunks_exact_mut(3).zip(rgba.chunks_exact(RGBA)) {
        out.copy_from_slice(&p[..3]);
    }
    rgb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neutral_pixels_become_gray() {
        let rgba = [0, 0, 0, 255, 128, 128, 128, 255, 255, 255, 255, 255];
        assert_eq!(gray_if_neutral(&rgba), Some(vec![0, 128, 255]));
    }

    #[test]
    fn one_coloured_pixel_means_colour() {
        let mut rgba = vec![200u8; 4 * 1000];
        rgba[4 * 999 + 2] = 201;
        assert_eq!(gray_if_neutral(&rgba), None);
        // Alpha is not colour.
        let rgba = [10, 10, 10, 0, 20, 20, 20, 255];
        assert_eq!(gray_if_neutral(&rgba), Some(vec![10, 20]));
    }

    #[test]
    fn rgb_drops_alpha() {
        assert_eq!(rgba_to_rgb(&[1, 2, 3, 255, 4, 5, 6, 255]), vec![1, 2, 3, 4, 5, 6]);
    }
}
