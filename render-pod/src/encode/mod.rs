//! Encoding rendered pages to PNG, JPEG or WebP without spending more time than the render.

mod format;
pub mod jpeg;
pub mod pixels;
pub mod png;
pub mod png_filter;
pub mod webp;

pub use format::{ImageFormat, Quality, UnknownFormat};

/// Pixels handed to an encoder, rows packed (no stride padding).
#[derive(Debug, Clone, Copy)]
pub enum Pixels<'a> {
    /// One byte per pixel.
    Gray(&'a [u8]),
    /// Three bytes per pixel.
    Rgb(&'a [u8]),
    /// Four bytes per pixel, alpha last.
    Rgba(&'a [u8]),
    /// Four bytes per pixel, blue first: a PDFium render as it comes.
    Bgra(&'a [u8]),
}

impl<'a> Pixels<'a> {
    /// Bytes per pixel of the layout.
    pub fn bytes_per_pixel(&self) -> usize {
        match self {
            Pixels::Gray(_) => 1,
            Pixels::Rgb(_) => 3,
            Pixels::Rgba(_) | Pixels::Bgra(_) => 4,
        }
    }

    /// The bytes, once checked to hold exactly `width` x `height` pixels (encoders panic or
    /// misbehave otherwise).
    pub fn checked(&self, width: u32, height: u32) -> Result<&'a [u8], EncodeError> {
        let data = match *self {
            Pixels::Gray(data) | Pixels::Rgb(data) | Pixels::Rgba(data) | Pixels::Bgra(data) => {
                data
            }
        };
        let bpp = self.bytes_per_pixel();
        let expected =
            (width as usize).checked_mul(height as usize).and_then(|n| n.checked_mul(bpp));
        if expected != Some(data.len()) {
            return Err(EncodeError::BadBuffer {
                width,
                height,
                bytes_per_pixel: bpp,
                len: data.len(),
            });
        }
        Ok(data)
    }
}

/// An encoder refused the image.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EncodeError {
    /// The pixel buffer does not hold exactly width * height pixels.
    #[error(
        "pixel buffer of {len} bytes does not fit {width}x{height} at {bytes_per_pixel} bytes per pixel"
    )]
    BadBuffer { width: u32, height: u32, bytes_per_pixel: usize, len: usize },
    /// The format cannot hold an image this big.
    #[error("{format} images are at most {max} pixels wide or high")]
    TooLarge { format: ImageFormat, max: u32 },
    /// The PNG encoder failed.
    #[error("PNG encoding failed: {0}")]
    Png(String),
    /// The JPEG encoder failed.
    #[error("JPEG encoding failed: {0}")]
    Jpeg(String),
    /// The WebP encoder failed.
    #[error("WebP encoding failed: {0}")]
    Webp(String),
}

/// Encodes an opaque BGRA render (rows packed) in `format`, lossy ones at `quality` (JPEG's
/// default when `None`; WebP is lossless without one), with per-format choices measured by
/// `benches/encoding.rs`. PNG, JPEG and lossless WebP encode a page without colour as grey (a
/// quarter of the bytes to read, filter, transform and compress); a colour page goes to PNG as
/// RGB (smaller than RGBA with its constant alpha). PNG converts, filters and compresses row by
/// row in one pass. JPEG and lossless WebP get a grey page's plane from the pass that finds it
/// neutral (measured 15 % and 7-11 % less time on grey pages than the BGRA converted by
/// libjpeg-turbo and than the page swapped to RGBA); libjpeg-turbo reads a colour page's BGRA
/// itself, lossless WebP's encoder, which takes no BGRA, gets it swapped to RGBA. Lossy WebP
/// reads BGRA itself.
pub fn encode_bgra(
    bgra: &[u8],
    width: u32,
    height: u32,
    format: ImageFormat,
    quality: Option<Quality>,
) -> Result<Vec<u8>, EncodeError> {
    let all = Pixels::Bgra(bgra);
    all.checked(width, height)?;
    match (format, quality) {
        (ImageFormat::Png, _) => png::encode_bgra(bgra, width, height, png::FILTERS),
        (ImageFormat::Jpeg, quality) => {
            let quality = quality.unwrap_or(jpeg::DEFAULT_QUALITY);
            match pixels::gray_if_neutral(bgra) {
                Some(grey) => jpeg::encode(&Pixels::Gray(&grey), width, height, quality),
                None => jpeg::encode(&all, width, height, quality),
            }
        }
        (ImageFormat::Webp, None) => match pixels::gray_if_neutral(bgra) {
            Some(grey) => webp::encode_lossless(&Pixels::Gray(&grey), width, height),
            None => {
                webp::encode_lossless(&Pixels::Rgba(&pixels::bgra_to_rgba(bgra)), width, height)
            }
        },
        (ImageFormat::Webp, Some(quality)) => {
            let how = webp::Libwebp::Lossy { quality, method: webp::LOSSY_METHOD };
            webp::encode_libwebp(bgra, width, height, how)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn refuses_a_buffer_of_the_wrong_size() {
        let err = encode_bgra(&[255; 12], 2, 2, ImageFormat::Png, None).unwrap_err();
        assert_eq!(
            err,
            EncodeError::BadBuffer { width: 2, height: 2, bytes_per_pixel: 4, len: 12 }
        );
        let err = png::encode_bgra(&[0; 3], 1, 1, png::FILTERS).unwrap_err();
        assert_eq!(err, EncodeError::BadBuffer { width: 1, height: 1, bytes_per_pixel: 4, len: 3 });
    }

    #[test]
    fn refuses_sizes_the_format_cannot_hold() {
        let wide = vec![255u8; 16_384 * 4];
        for quality in [None, Quality::new(50)] {
            let err = encode_bgra(&wide, 16_384, 1, ImageFormat::Webp, quality).unwrap_err();
            assert_eq!(err, EncodeError::TooLarge { format: ImageFormat::Webp, max: 16_383 });
        }
        let wide = vec![255u8; 65_536 * 4];
        let err = encode_bgra(&wide, 65_536, 1, ImageFormat::Jpeg, None).unwrap_err();
        assert_eq!(err, EncodeError::TooLarge { format: ImageFormat::Jpeg, max: 65_535 });
        assert!(encode_bgra(&wide, 65_536, 1, ImageFormat::Png, None).is_ok());
    }

    #[test]
    fn every_format_writes_its_signature() {
        // A 2x2 page with one red pixel: colour path; and an all-grey one: grey path.
        let colour = [255, 0, 0, 255, 255, 255, 255, 255, 0, 0, 0, 255, 9, 9, 9, 255];
        let grey = [0, 0, 0, 255, 255, 255, 255, 255, 0, 0, 0, 255, 9, 9, 9, 255];
        for bgra in [colour, grey] {
            let png = encode_bgra(&bgra, 2, 2, ImageFormat::Png, None).unwrap();
            assert!(png.starts_with(b"\x89PNG"));
            for quality in [None, Quality::new(60)] {
                let jpeg = encode_bgra(&bgra, 2, 2, ImageFormat::Jpeg, quality).unwrap();
                assert!(jpeg.starts_with(&[0xFF, 0xD8]));
                let webp = encode_bgra(&bgra, 2, 2, ImageFormat::Webp, quality).unwrap();
                assert!(webp.starts_with(b"RIFF") && &webp[8..12] == b"WEBP");
            }
        }
    }

    #[test]
    fn grey_and_colour_pages_keep_their_pixels_and_colour() {
        // A page with antialiased grey strokes, and the same page with one blue pixel.
        let (w, h) = (40u32, 30u32);
        let grey: Vec<u8> =
            (0..w * h).flat_map(|i| [((i * 37) % 256) as u8; 3].into_iter().chain([255])).collect();
        let mut colour = grey.clone();
        colour[4 * 555..4 * 556].copy_from_slice(&[200, 10, 10, 255]);
        let rgb = |bgra: &[u8]| -> Vec<u8> {
            bgra.chunks_exact(4).flat_map(|p| [p[2], p[1], p[0]]).collect()
        };
        for (bgra, is_grey) in [(&grey, true), (&colour, false)] {
            let lossless = encode_bgra(bgra, w, h, ImageFormat::Webp, None).unwrap();
            let back = image::load_from_memory(&lossless).unwrap().to_rgb8();
            assert_eq!(back.into_raw(), rgb(bgra), "lossless WebP keeps every pixel");
            let jpeg = encode_bgra(bgra, w, h, ImageFormat::Jpeg, None).unwrap();
            let back = image::load_from_memory(&jpeg).unwrap();
            let channels = if is_grey { image::ColorType::L8 } else { image::ColorType::Rgb8 };
            assert_eq!(back.color(), channels, "a grey page is one channel, colour three");
        }
    }
}
