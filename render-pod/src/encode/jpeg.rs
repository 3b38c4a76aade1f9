//! JPEG through libjpeg-turbo (the `turbojpeg` crate, whose bundled C and assembly sources are
//! built with CMake and nasm and linked statically): grey pixels as a one-channel JPEG, colour
//! with 4:2:0 chroma. Chosen over the pure-Rust encoder it replaced and over mozjpeg's fastest
//! settings with `benches/encoding.rs` (docs/benchmarks.md).

use turbojpeg::{Compressor, Image, PixelFormat, Subsamp};

use super::{EncodeError, ImageFormat, Pixels, Quality};

/// Quality for page previews when the client names none: text stays crisp enough, files stay
/// small.
pub const DEFAULT_QUALITY: Quality = Quality::new_const(80);

/// Encodes `pixels` (rows packed) as a baseline JPEG of `quality`: grey pixels as one channel,
/// colour ones with their chroma at half the resolution each way (4:2:0, as photographs are
/// kept).
pub fn encode(
    pixels: &Pixels<'_>,
    width: u32,
    height: u32,
    quality: Quality,
) -> Result<Vec<u8>, EncodeError> {
    let data = pixels.checked(width, height)?;
    let max = ImageFormat::Jpeg.max_dimension();
    if width > max || height > max {
        return Err(EncodeError::TooLarge { format: ImageFormat::Jpeg, max });
    }
    let format = match pixels {
        Pixels::Gray(_) => PixelFormat::GRAY,
        Pixels::Rgb(_) => PixelFormat::RGB,
        Pixels::Rgba(_) => PixelFormat::RGBA,
        Pixels::Bgra(_) => PixelFormat::BGRA,
    };
    let subsamp = match pixels {
        Pixels::Gray(_) => Subsamp::Gray,
        Pixels::Rgb(_) | Pixels::Rgba(_) | Pixels::Bgra(_) => Subsamp::Sub2x2,
    };
    let (width, height) = (width as usize, height as usize);
    let image =
        Image { pixels: data, width, pitch: width * pixels.bytes_per_pixel(), height, format };
    let jpeg = |e: turbojpeg::Error| EncodeError::Jpeg(e.to_string());
    let mut compressor = Compressor::new().map_err(jpeg)?;
    compressor.set_quality(i32::from(quality.get())).map_err(jpeg)?;
    compressor.set_subsamp(subsamp).map_err(jpeg)?;
    compressor.compress_to_vec(image).map_err(jpeg)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// Decodes with the `image` crate's own decoder (not libjpeg-turbo's).
    fn decode(jpeg: &[u8]) -> image::DynamicImage {
        image::load_from_memory_with_format(jpeg, image::ImageFormat::Jpeg).unwrap()
    }

    #[test]
    fn grey_and_colour_decode_close_to_what_was_encoded() {
        let (w, h) = (64u32, 48u32);
        // A smooth gradient: JPEG at quality 90 keeps it within a few levels.
        let grey: Vec<u8> = (0..w * h).map(|i| ((i % w) * 4) as u8).collect();
        let q90 = Quality::new(90).unwrap();
        let out = encode(&Pixels::Gray(&grey), w, h, q90).unwrap();
        let back = decode(&out);
        assert_eq!(back.color(), image::ColorType::L8);
        let worst = back.as_bytes().iter().zip(&grey).map(|(a, b)| a.abs_diff(*b)).max();
        assert!(worst.unwrap() <= 4, "worst difference {worst:?}");
        let bgra: Vec<u8> = grey.iter().flat_map(|g| [*g, 128, 255 - *g, 255]).collect();
        let out = encode(&Pixels::Bgra(&bgra), w, h, q90).unwrap();
        let back = decode(&out).to_rgb8();
        let rgb: Vec<u8> = bgra.chunks_exact(4).flat_map(|p| [p[2], p[1], p[0]]).collect();
        let worst = back.as_raw().iter().zip(&rgb).map(|(a, b)| a.abs_diff(*b)).max();
        assert!(worst.unwrap() <= 8, "worst difference {worst:?}");
    }

    #[test]
    fn lower_quality_makes_smaller_files() {
        let (w, h) = (96u32, 96u32);
        let noise: Vec<u8> =
            (0..w * h).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let at = |q| encode(&Pixels::Gray(&noise), w, h, Quality::new(q).unwrap());
        let (small, large) = (at(20).unwrap(), at(95).unwrap());
        assert!(small.len() < large.len(), "{} >= {}", small.len(), large.len());
    }
}
