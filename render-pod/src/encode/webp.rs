//! WebP: lossless, through the pure-Rust `image-webp` encoder.

use image_webp::{ColorType, WebPEncoder};

use super::{EncodeError, ImageFormat, Pixels};

/// Encodes `pixels` (rows packed) as lossless WebP. Chosen over libwebp's lossy mode with
/// `benches/encoding.rs`: lossy (quality 80, effort 2) made files about a third smaller but took
/// 50-80 ms a page, three to four times the render itself; lossless takes 8-12 ms, is a third
/// the size of a default PNG and keeps text edges exact.
pub fn encode(pixels: &Pixels<'_>, width: u32, height: u32) -> Result<Vec<u8>, EncodeError> {
    let max = ImageFormat::Webp.max_dimension();
    if width > max || height > max {
        return Err(EncodeError::TooLarge { format: ImageFormat::Webp, max });
    }
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
