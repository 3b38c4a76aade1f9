//! JPEG: the pure-Rust `jpeg-encoder`, fed grey or BGRA without conversion.

use jpeg_encoder::{ColorType, Encoder};

use super::{EncodeError, ImageFormat, Pixels};

/// Quality for page previews: text stays crisp enough, files stay small.
pub const QUALITY: u8 = 80;

/// Encodes `pixels` (rows packed) as a baseline JPEG.
pub fn encode(pixels: &Pixels<'_>, width: u32, height: u32) -> Result<Vec<u8>, EncodeError> {
    let data = pixels.checked(width, height)?;
    let color = match pixels {
        Pixels::Gray(_) => ColorType::Luma,
        Pixels::Rgb(_) => ColorType::Rgb,
        Pixels::Rgba(_) => ColorType::Rgba,
        Pixels::Bgra(_) => ColorType::Bgra,
    };
    let (w, h) = (dimension(width)?, dimension(height)?);
    let mut out = Vec::with_capacity(data.len() / 16);
    Encoder::new(&mut out, QUALITY)
        .encode(data, w, h, color)
        .map_err(|e| EncodeError::Jpeg(e.to_string()))?;
    Ok(out)
}

/// JPEG sizes are 16-bit.
fn dimension(n: u32) -> Result<u16, EncodeError> {
    u16::try_from(n).map_err(|_| EncodeError::TooLarge {
        format: ImageFormat::Jpeg,
        max: ImageFormat::Jpeg.max_dimension(),
    })
}
