//! PNG through the `png` crate, whose fast mode is fdeflate (a deflate tuned for PNG rows).

use png::{BitDepth, ColorType, Compression, Encoder, Filter};

use super::{EncodeError, Pixels};

/// Compression and row filter of a PNG encode.
#[derive(Debug, Clone, Copy)]
pub struct PngSettings {
    /// Deflate effort.
    pub compression: Compression,
    /// Row filter (`Adaptive` tries each per row).
    pub filter: Filter,
}

/// For pages without colour, chosen from `benches/encoding.rs`: on a grey plane of mostly flat
/// background, fdeflate with the `Up` filter beats a default RGBA encode in both size and speed.
pub const GREY: PngSettings = PngSettings { compression: Compression::Fast, filter: Filter::Up };

/// For colour pages, chosen from `benches/encoding.rs`: `Paeth` keeps RGB output no larger than
/// a default RGBA encode (`Up` was a little faster but larger).
pub const COLOUR: PngSettings =
    PngSettings { compression: Compression::Fast, filter: Filter::Paeth };

/// Encodes `pixels` (rows packed) as an 8-bit PNG.
pub fn encode(
    pixels: &Pixels<'_>,
    width: u32,
    height: u32,
    settings: PngSettings,
) -> Result<Vec<u8>, EncodeError> {
    let data = pixels.checked(width, height)?;
    let color = match pixels {
        Pixels::Gray(_) => ColorType::Grayscale,
        Pixels::Rgb(_) => ColorType::Rgb,
        Pixels::Rgba(_) => ColorType::Rgba,
    };
    let mut out = Vec::with_capacity(data.len() / 8);
    let mut encoder = Encoder::new(&mut out, width, height);
    encoder.set_color(color);
    encoder.set_depth(BitDepth::Eight);
    encoder.set_compression(settings.compression);
    encoder.set_filter(settings.filter);
    let mut writer = encoder.write_header().map_err(png_error)?;
    writer.write_image_data(data).map_err(png_error)?;
    writer.finish().map_err(png_error)?;
    Ok(out)
}

fn png_error(e: png::EncodingError) -> EncodeError {
    EncodeError::Png(e.to_string())
}
