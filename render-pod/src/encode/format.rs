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
    /// Baseline JPEG (lossy; quality 80 unless the client names one).
    Jpeg,
    /// WebP: lossless, or lossy when the client names a quality.
    Webp,
}

/// How much a lossy encode may lose: 1 (smallest files) to 100 (best pictures).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub struct Quality(u8);

impl Quality {
    /// The lowest quality.
    pub const MIN: u8 = 1;
    /// The highest quality.
    pub const MAX: u8 = 100;

    /// A quality from 1 to 100, else `None`.
    pub fn new(quality: u32) -> Option<Self> {
        let quality = u8::try_from(quality).ok()?;
        (Self::MIN..=Self::MAX).contains(&quality).then_some(Self(quality))
    }

    /// A quality known when compiling (a default).
    pub const fn new_const(quality: u8) -> Self {
        assert!(quality >= Self::MIN && quality <= Self::MAX, "quality is 1 to 100");
        Self(quality)
    }

    /// The number.
    pub fn get(self) -> u8 {
        self.0
    }
}

impl TryFrom<u8> for Quality {
    type Error = String;

    fn try_from(quality: u8) -> Result<Self, String> {
        Self::new(u32::from(quality)).ok_or_else(|| format!("quality {quality} is not 1 to 100"))
    }
}

impl From<Quality> for u8 {
    fn from(quality: Quality) -> u8 {
        quality.0
    }
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

    /// Whether the format takes a quality.
    pub fn takes_quality(&self) -> bool {
        matches!(self, ImageFormat::Jpeg | ImageFormat::Webp)
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

    #[test]
    fn quality_is_1_to_100_wherever_it_comes_from() {
        assert_eq!(Quality::new(1).map(Quality::get), Some(1));
        assert_eq!(Quality::new(100).map(Quality::get), Some(100));
        for bad in [0, 101, 256, u32::MAX] {
            assert_eq!(Quality::new(bad), None, "{bad}");
        }
        let frame = postcard::to_stdvec(&Quality::new(80).unwrap()).unwrap();
        assert_eq!(postcard::from_bytes::<Quality>(&frame).unwrap().get(), 80);
        assert!(postcard::from_bytes::<Quality>(&postcard::to_stdvec(&0u8).unwrap()).is_err());
    }
}
