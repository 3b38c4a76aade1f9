//! WebP: lossless through the pure-Rust `image-webp` encoder, lossy (with a quality) through
//! libwebp (the `libwebp-sys` crate, whose bundled C sources are built with cc and linked
//! statically). Each was chosen with `benches/encoding.rs` (docs/benchmarks.md).

use std::ffi::c_int;

use image_webp::{ColorType, WebPEncoder};
use libwebp_sys as sys;

use super::{EncodeError, ImageFormat, Pixels, Quality};

/// libwebp's effort (`method`, 0 fastest to 6 smallest) for lossy pages: measured with
/// `benches/encoding.rs`, where each step up cost more time than it saved bytes.
pub const LOSSY_METHOD: c_int = 0;

/// Encodes `pixels` (rows packed) as lossless WebP.
pub fn encode_lossless(
    pixels: &Pixels<'_>,
    width: u32,
    height: u32,
) -> Result<Vec<u8>, EncodeError> {
    check_size(width, height)?;
    let data = pixels.checked(width, height)?;
    let color = match pixels {
        Pixels::Gray(_) => ColorType::L8,
        Pixels::Rgb(_) => ColorType::Rgb8,
        Pixels::Rgba(_) => ColorType::Rgba8,
        Pixels::Bgra(_) => {
            return Err(EncodeError::Webp("the encoder takes RGBA, not BGRA".to_owned()));
        }
    };
    let mut out = Vec::with_capacity(data.len() / 8);
    WebPEncoder::new(&mut out)
        .encode(data, width, height, color)
        .map_err(|e| EncodeError::Webp(e.to_string()))?;
    Ok(out)
}

/// How libwebp encodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Libwebp {
    /// Lossy (VP8) at `quality`, with `method` effort (0 to 6).
    Lossy { quality: Quality, method: c_int },
    /// Lossless (VP8L) at a preset `level` (0 fastest to 9 smallest).
    Lossless { level: c_int },
}

/// Encodes an opaque BGRA render (rows packed) with libwebp, which reads BGRA itself.
pub fn encode_libwebp(
    bgra: &[u8],
    width: u32,
    height: u32,
    how: Libwebp,
) -> Result<Vec<u8>, EncodeError> {
    check_size(width, height)?;
    Pixels::Bgra(bgra).checked(width, height)?;
    let failed = |what: &str| EncodeError::Webp(format!("libwebp: {what}"));
    // Within 16383 (checked above), so these fit a C int.
    let (w, h) = (width as c_int, height as c_int);
    let stride = w * 4;
    let abi = sys::WEBP_ENCODER_ABI_VERSION as c_int;
    // SAFETY: the config and picture are initialised by libwebp before use; the picture imports
    // from `bgra`, which holds exactly `height` rows of `stride` bytes (checked above), and is
    // freed on every path; the memory writer's buffer is copied out, then cleared, once.
    unsafe {
        let mut config = std::mem::MaybeUninit::<sys::WebPConfig>::uninit();
        let (preset, quality) = match how {
            Libwebp::Lossy { quality, .. } => (sys::WebPPreset::WEBP_PRESET_TEXT, quality.get()),
            Libwebp::Lossless { .. } => (sys::WebPPreset::WEBP_PRESET_DEFAULT, 75),
        };
        if sys::WebPConfigInitInternal(config.as_mut_ptr(), preset, f32::from(quality), abi) == 0 {
            return Err(failed("configuration refused"));
        }
        let mut config = config.assume_init();
        match how {
            Libwebp::Lossy { method, .. } => config.method = method,
            Libwebp::Lossless { level } => {
                if sys::WebPConfigLosslessPreset(&mut config, level) == 0 {
                    return Err(failed("lossless level refused"));
                }
            }
        }
        if sys::WebPValidateConfig(&config) == 0 {
            return Err(failed("configuration invalid"));
        }
        let mut picture = std::mem::MaybeUninit::<sys::WebPPicture>::uninit();
        if sys::WebPPictureInitInternal(picture.as_mut_ptr(), abi) == 0 {
            return Err(failed("picture refused"));
        }
        let mut picture = picture.assume_init();
        picture.width = w;
        picture.height = h;
        // Lossless works on ARGB, lossy on YUV converted straight from BGRA.
        picture.use_argb = c_int::from(matches!(how, Libwebp::Lossless { .. }));
        if sys::WebPPictureImportBGRA(&mut picture, bgra.as_ptr(), stride) == 0 {
            sys::WebPPictureFree(&mut picture);
            return Err(failed("out of memory importing the page"));
        }
        let mut writer = std::mem::MaybeUninit::<sys::WebPMemoryWriter>::uninit();
        sys::WebPMemoryWriterInit(writer.as_mut_ptr());
        let mut writer = writer.assume_init();
        picture.writer = Some(sys::WebPMemoryWrite);
        picture.custom_ptr = (&raw mut writer).cast();
        let encoded = sys::WebPEncode(&config, &mut picture);
        let error = picture.error_code;
        sys::WebPPictureFree(&mut picture);
        let result = if encoded == 0 || writer.mem.is_null() {
            Err(failed(&format!("encoding failed ({error:?})")))
        } else {
            Ok(std::slice::from_raw_parts(writer.mem, writer.size).to_vec())
        };
        sys::WebPMemoryWriterClear(&mut writer);
        result
    }
}

/// WebP sizes are 14-bit.
fn check_size(width: u32, height: u32) -> Result<(), EncodeError> {
    let max = ImageFormat::Webp.max_dimension();
    if width > max || height > max {
        return Err(EncodeError::TooLarge { format: ImageFormat::Webp, max });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn decode(webp: &[u8]) -> image::RgbaImage {
        image::load_from_memory_with_format(webp, image::ImageFormat::WebP).unwrap().to_rgba8()
    }

    /// A page-like picture: white, with dark bars and one blue one.
    fn page(width: u32, height: u32) -> Vec<u8> {
        let mut bgra = vec![255u8; (width * height * 4) as usize];
        for (i, p) in bgra.chunks_exact_mut(4).enumerate() {
            let (x, y) = (i as u32 % width, i as u32 / width);
            if y % 16 < 4 && x > 8 && x < width - 8 {
                let blue = y / 16 == 2;
                p.copy_from_slice(if blue { &[200, 40, 20, 255] } else { &[30, 30, 30, 255] });
            }
        }
        bgra
    }

    #[test]
    fn lossy_decodes_close_to_the_page_and_lossless_exactly() {
        let (w, h) = (120u32, 80u32);
        let bgra = page(w, h);
        let rgba: Vec<u8> = bgra.chunks_exact(4).flat_map(|p| [p[2], p[1], p[0], 255]).collect();
        let quality = Quality::new(90).unwrap();
        let lossy =
            encode_libwebp(&bgra, w, h, Libwebp::Lossy { quality, method: LOSSY_METHOD }).unwrap();
        assert!(lossy.starts_with(b"RIFF") && &lossy[8..16] == b"WEBPVP8 ", "a lossy VP8 frame");
        let back = decode(&lossy);
        let mean =
            back.as_raw().iter().zip(&rgba).map(|(a, b)| u64::from(a.abs_diff(*b))).sum::<u64>()
                / rgba.len() as u64;
        assert!(mean <= 6, "mean difference {mean}");
        let lossless = encode_libwebp(&bgra, w, h, Libwebp::Lossless { level: 0 }).unwrap();
        assert_eq!(&lossless[8..16], b"WEBPVP8L");
        assert_eq!(decode(&lossless).as_raw(), &rgba);
    }

    #[test]
    fn sizes_past_the_format_and_bad_buffers_are_refused() {
        let quality = Quality::new(50).unwrap();
        let lossy = Libwebp::Lossy { quality, method: 0 };
        let wide = vec![255u8; 16_384 * 4];
        assert!(matches!(
            encode_libwebp(&wide, 16_384, 1, lossy),
            Err(EncodeError::TooLarge { .. })
        ));
        assert!(matches!(
            encode_libwebp(&[0; 12], 2, 2, lossy),
            Err(EncodeError::BadBuffer { .. })
        ));
    }

    #[test]
    fn the_linked_libwebp_is_the_pinned_one() {
        // libwebp-sys 0.14.4 bundles libwebp 1.6.0, packed as 0xMMmmrr.
        // SAFETY: a pure query of a constant.
        assert_eq!(unsafe { sys::WebPGetEncoderVersion() }, 0x01_06_00);
    }
}
