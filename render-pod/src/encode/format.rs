//! The output image formats a client may ask for.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// An encoded image format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    /// Lossless PNG (the default: exact text edges).
    Png,
    /// Baseline JPEG.
    Jpeg,
    /// Lossless WebP.
    Webp,
}

impl ImageFormat {
    /// The HTTP `Content-Type` of images in this format.
    pub fn content_type(&self) -> &'static str {
        match self {
            ImageFormat::Png => "image/png",
            ImageFormat::Jpeg => "image/jpeg",
            ImageFormat::Webp => "image/webp",
        }
    }

    /// The largest width or height the format can store (checked before rendering).
    pub fn max_dimension(&self) -> u32 {
        match self {
            ImageFormat::Png => i32::MAX as u32,
            ImageFormat::Jpeg => u32::from(u16::MAX),
            ImageFormat::Webp => 16_383,
        }
    }

    /// The usual file name extension, without the dot.
    pub fn extension(&self) -> &'static str {
        match self {
            ImageFormat::Png => "png",
            ImageFormat::Jpeg => "jpg",
            ImageFormat::Webp => "webp",
        }
    }
}

/// A format name that is none of `png`, `jpeg`, `jpg`, `webp`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown image format {0:?} (expected png, jpeg or webp)")]
pub struct UnknownFormat(pub String);

impl FromStr for ImageFormat {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "png" => Ok(ImageFormat::Png),
            "jpeg" | "jpg" => Ok(ImageFormat::Jpeg),
            "webp" => Ok(ImageFormat::Webp),
            _ => Err(UnknownFormat(s.to_string())),
        }
    }
}

impl fmt::Display for ImageFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ImageFormat::Png => "png",
            ImageFormat::Jpeg => "jpeg",
            ImageFormat::Webp => "webp",
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_names_and_aliases() {
        assert_eq!("png".parse::<ImageFormat>().unwrap(), ImageFormat::Png);
        assert_eq!("JPG".parse::<ImageFormat>().unwrap(), ImageFormat::Jpeg);
        assert_eq!("jpeg".parse::<ImageFormat>().unwrap(), ImageFormat::Jpeg);
        assert_eq!("webp".parse::<ImageFormat>().unwrap(), ImageFormat::Webp);
        assert!("gif".parse::<ImageFormat>().is_err());
        assert_eq!(ImageFormat::Webp.content_type(), "image/webp");
        assert_eq!(
            ImageFormat::Jpeg.to_string().parse::<ImageFormat>().unwrap(),
            ImageFormat::Jpeg
        );
    }
}
