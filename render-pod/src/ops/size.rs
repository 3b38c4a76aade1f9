//! Pixel size of a rendered page and the checks on it, before any bitmap exists.

use super::{OpError, RenderSize};

/// Resolution when a render names neither a dpi nor a width (the service's and the one-shot
/// command's alike).
pub const DEFAULT_DPI: f32 = 150.0;
/// Lowest and highest accepted dpi.
pub const DPI_RANGE: std::ops::RangeInclusive<f32> = 1.0..=1200.0;
/// Lowest and highest accepted target width in pixels.
pub const WIDTH_RANGE: std::ops::RangeInclusive<u32> = 1..=10_000;

/// Refuses a dpi or width outside the accepted ranges (no document needed).
pub fn validate(size: RenderSize) -> Result<(), OpError> {
    match size {
        RenderSize::Dpi(dpi) if !DPI_RANGE.contains(&dpi) => Err(OpError::invalid(format!(
            "dpi must be between {} and {}, got {dpi}",
            DPI_RANGE.start(),
            DPI_RANGE.end()
        ))),
        RenderSize::Width(width) if !WIDTH_RANGE.contains(&width) => {
            Err(OpError::invalid(format!(
                "width must be between {} and {}, got {width}",
                WIDTH_RANGE.start(),
                WIDTH_RANGE.end()
            )))
        }
        _ => Ok(()),
    }
}

/// Pixel width and height for a page of `width_pt` x `height_pt` points (as displayed), each at
/// least 1; `Width` keeps the aspect ratio. Wide enough (u64) that no page size overflows.
pub fn pixel_size(width_pt: f32, height_pt: f32, size: RenderSize) -> Result<(u64, u64), OpError> {
    validate(size)?;
    let (w_pt, h_pt) = (f64::from(width_pt), f64::from(height_pt));
    if !(w_pt.is_finite() && h_pt.is_finite() && w_pt > 0.0 && h_pt > 0.0) {
        return Err(OpError::Unreadable {
            detail: format!("page has no usable size ({width_pt} x {height_pt} pt)"),
        });
    }
    let (w, h) = match size {
        RenderSize::Dpi(dpi) => {
            let scale = f64::from(dpi) / 72.0;
            (w_pt * scale, h_pt * scale)
        }
        RenderSize::Width(width) => (f64::from(width), f64::from(width) * h_pt / w_pt),
    };
    // Float to int casts saturate, so an absurd page cannot wrap around to a small size.
    Ok(((w.round() as u64).max(1), (h.round() as u64).max(1)))
}

/// Checks a bitmap size against `max_pixels` and what a PDFium bitmap can address (a 32-bit
/// stride of 4 bytes per pixel), returning it as PDFium's pixel type.
pub fn check_pixels(width: u64, height: u64, max_pixels: u64) -> Result<(i32, i32), OpError> {
    let too_many = || OpError::TooManyPixels { width, height, max_pixels };
    if width.saturating_mul(height) > max_pixels {
        return Err(too_many());
    }
    let addressable = |n: u64| i32::try_from(n.saturating_mul(4)).is_ok();
    if !addressable(width) || !addressable(height) {
        return Err(too_many());
    }
    Ok((width as i32, height as i32))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn seventy_two_dpi_is_one_pixel_per_point() {
        assert_eq!(pixel_size(612.0, 792.0, RenderSize::Dpi(72.0)).unwrap(), (612, 792));
        assert_eq!(pixel_size(612.0, 792.0, RenderSize::Dpi(150.0)).unwrap(), (1275, 1650));
    }

    #[test]
    fn width_keeps_the_aspect_ratio() {
        assert_eq!(pixel_size(612.0, 792.0, RenderSize::Width(160)).unwrap(), (160, 207));
        assert_eq!(pixel_size(792.0, 612.0, RenderSize::Width(1000)).unwrap(), (1000, 773));
        // A sliver page still gets one pixel.
        assert_eq!(pixel_size(1000.0, 0.1, RenderSize::Width(10)).unwrap(), (10, 1));
    }

    #[test]
    fn out_of_range_sizes_are_invalid_requests() {
        for size in [
            RenderSize::Dpi(0.0),
            RenderSize::Dpi(-5.0),
            RenderSize::Dpi(1200.5),
            RenderSize::Dpi(f32::NAN),
            RenderSize::Dpi(f32::INFINITY),
            RenderSize::Width(0),
            RenderSize::Width(10_001),
        ] {
            assert_eq!(validate(size).unwrap_err().code(), "invalid_request", "{size:?}");
        }
        assert!(validate(RenderSize::Dpi(1200.0)).is_ok());
        assert!(validate(RenderSize::Width(10_000)).is_ok());
    }

    #[test]
    fn degenerate_pages_are_unreadable() {
        let err = pixel_size(0.0, 792.0, RenderSize::Dpi(72.0)).unwrap_err();
        assert_eq!(err.code(), "unreadable_document");
    }

    #[test]
    fn pixel_budget_is_enforced() {
        assert_eq!(check_pixels(1000, 1000, 1_000_000).unwrap(), (1000, 1000));
        assert_eq!(
            check_pixels(1001, 1000, 1_000_000).unwrap_err(),
            OpError::TooManyPixels { width: 1001, height: 1000, max_pixels: 1_000_000 }
        );
        // Even an unlimited budget cannot ask PDFium for an unaddressable bitmap.
        assert!(check_pixels(600_000_000, 1, u64::MAX).is_err());
        assert!(check_pixels(u64::MAX, u64::MAX, u64::MAX).is_err());
    }
}
