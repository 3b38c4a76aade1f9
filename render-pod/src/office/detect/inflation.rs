//! What a ZIP package declares it inflates to, weighed before Gotenberg sees it: the sum of
//! its parts' uncompressed sizes, its largest part and each part's compression ratio, all from
//! the central directory (one pass, never a decompression). A directory that lies (declares
//! little, inflates to much) passes here; LibreOffice finds out, and the conversion's deadline
//! and the quarantine take it from there.

use super::zip::{self, Entry, ZipError};

/// A part declaring less than this is never judged by its ratio: small parts of repetitive
/// XML (an empty sheet, a style list) compress far better than 100 to 1 and cost nothing to
/// inflate.
pub const RATIO_FLOOR_BYTES: u64 = 1 << 20;

/// The limits a package must keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InflationLimits {
    /// Most bytes all parts may inflate to together.
    pub max_inflated_bytes: u64,
    /// Most bytes one part may inflate to.
    pub max_part_bytes: u64,
    /// Highest uncompressed-to-compressed ratio of a part above [`RATIO_FLOOR_BYTES`].
    pub max_ratio: u64,
}

/// What the directory declares.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inflation {
    /// Declared uncompressed bytes of all parts.
    pub inflated_bytes: u64,
    /// The largest part and its declared uncompressed bytes.
    pub largest: Option<(String, u64)>,
}

/// Why a package is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InflationError {
    /// The directory cannot be read (the detector refuses such a package before this).
    #[error(transparent)]
    Damaged(#[from] ZipError),
    /// All parts together inflate past the limit.
    #[error("the package inflates to {inflated} bytes, more than the limit of {max}")]
    TooLarge { inflated: u64, max: u64 },
    /// One part inflates past the limit.
    #[error("the part {part:?} inflates to {inflated} bytes, more than the limit of {max}")]
    PartTooLarge { part: String, inflated: u64, max: u64 },
    /// One part inflates far more than documents do: a ZIP bomb.
    #[error(
        "the part {part:?} inflates from {compressed} to {inflated} bytes (more than {max} to 1): a ZIP bomb"
    )]
    Bomb { part: String, compressed: u64, inflated: u64, max: u64 },
}

/// Weighs the package in `bytes` against `limits`; what is no ZIP archive (a legacy compound
/// file, RTF) declares nothing and passes.
pub fn check(bytes: &[u8], limits: &InflationLimits) -> Result<Inflation, InflationError> {
    if !zip::is_zip(bytes) {
        return Ok(Inflation::default());
    }
    weigh(&zip::entries(bytes)?, limits)
}

/// Weighs directory entries: a bomb is named first (the most specific answer), then a part
/// or a total past its limit.
fn weigh(entries: &[Entry<'_>], limits: &InflationLimits) -> Result<Inflation, InflationError> {
    let name = |entry: &Entry<'_>| String::from_utf8_lossy(entry.name).into_owned();
    for entry in entries {
        let over_ratio = entry.uncompressed > RATIO_FLOOR_BYTES
            && entry.uncompressed > entry.compressed.saturating_mul(limits.max_ratio);
        if over_ratio {
            return Err(InflationError::Bomb {
                part: name(entry),
                compressed: entry.compressed,
                inflated: entry.uncompressed,
                max: limits.max_ratio,
            });
        }
    }
    let largest = entries.iter().max_by_key(|entry| entry.uncompressed);
    if let Some(entry) = largest.filter(|entry| entry.uncompressed > limits.max_part_bytes) {
        return Err(InflationError::PartTooLarge {
            part: name(entry),
            inflated: entry.uncompressed,
            max: limits.max_part_bytes,
        });
    }
    let inflated_bytes =
        entries.iter().fold(0u64, |sum, entry| sum.saturating_add(entry.uncompressed));
    if inflated_bytes > limits.max_inflated_bytes {
        return Err(InflationError::TooLarge {
            inflated: inflated_bytes,
            max: limits.max_inflated_bytes,
        });
    }
    Ok(Inflation {
        inflated_bytes,
        largest: largest.map(|entry| (name(entry), entry.uncompressed)),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use renderpool_testkit::packages::{self, Declared, Package};

    use super::*;

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    const LIMITS: InflationLimits =
        InflationLimits { max_inflated_bytes: GIB, max_part_bytes: 512 * MIB, max_ratio: 100 };

    #[test]
    fn ordinary_packages_pass_and_are_weighed() {
        let docx = packages::docx("hello\nworld");
        let weighed = check(&docx, &LIMITS).unwrap();
        assert_eq!(
            weighed.largest.as_ref().map(|(name, _)| name.as_str()),
            Some("[Content_Types].xml")
        );
        assert!(weighed.inflated_bytes > 0 && weighed.inflated_bytes < 4096, "{weighed:?}");
        // An honest slow document compresses a few to one: no bomb.
        let slow = packages::slow_docx(20_000, 1);
        let weighed = check(&slow, &LIMITS).unwrap();
        assert!(weighed.inflated_bytes > MIB, "{weighed:?}");
    }

    #[test]
    fn a_bomb_is_named_by_its_ratio_from_the_directory_alone() {
        // 64 MiB from about 64 KiB: a thousand to one, under every size limit.
        let bomb = packages::inflate_bomb_docx(64 * MIB);
        assert!(bomb.len() < (256 << 10), "{}", bomb.len());
        match check(&bomb, &LIMITS) {
            Err(InflationError::Bomb { part, compressed, inflated, max: 100 }) => {
                assert_eq!(part, "word/document.xml");
                assert!(inflated / compressed > 100, "{compressed} -> {inflated}");
            }
            other => panic!("{other:?}"),
        }
        // The same ratio in a part under the floor is not judged.
        let small = packages::inflate_bomb_docx(MIB / 2);
        assert!(check(&small, &LIMITS).is_ok());
        // The lying bomb declares a plausible size: only inflating it would tell.
        let liar = packages::lying_bomb_docx(64 * MIB, 4 * MIB);
        assert!(check(&liar, &LIMITS).is_ok());
    }

    #[test]
    fn sizes_past_the_limits_are_refused_zip64_included() {
        let declared = |uncompressed: u64, compressed: u64| Declared {
            uncompressed: Some(uncompressed),
            compressed: Some(compressed),
        };
        // Declared sizes only: nothing reads the data, so a few bytes can stand for gigabytes
        // (a ratio of 4 to 1, far from a bomb's).
        let part = |package: Package, name: &str, uncompressed: u64| {
            package.deflated_repeat(
                name,
                b"x",
                b"",
                0,
                b"",
                declared(uncompressed, uncompressed / 4),
            )
        };
        let big = part(Package::new(), "word/document.xml", 600 * MIB).finish();
        assert!(matches!(
            check(&big, &LIMITS),
            Err(InflationError::PartTooLarge { inflated, max, .. }) if inflated == 600 * MIB && max == 512 * MIB
        ));
        let many = (0..3)
            .fold(Package::new(), |p, i| part(p, &format!("word/media/image{i}.png"), 400 * MIB))
            .finish();
        assert!(matches!(
            check(&many, &LIMITS),
            Err(InflationError::TooLarge { inflated, .. }) if inflated == 1200 * MIB
        ));
        // Past 4 GiB the sizes are in the ZIP64 extra field, and are read from there.
        let huge = part(Package::new(), "xl/worksheets/sheet1.xml", 5 * GIB).finish();
        assert!(matches!(
            check(&huge, &LIMITS),
            Err(InflationError::PartTooLarge { inflated, .. }) if inflated == 5 * GIB
        ));
        let roomy = InflationLimits {
            max_inflated_bytes: 8 * GIB,
            max_part_bytes: 8 * GIB,
            max_ratio: 100,
        };
        assert_eq!(check(&huge, &roomy).unwrap().inflated_bytes, 5 * GIB);
        // A ZIP64 bomb: 5 GiB from 1 MiB.
        let bomb = Package::new()
            .deflated_repeat("word/document.xml", b"x", b"", 0, b"", declared(5 * GIB, MIB))
            .finish();
        assert!(matches!(check(&bomb, &roomy), Err(InflationError::Bomb { .. })));
    }

    #[test]
    fn what_is_no_zip_declares_nothing() {
        assert_eq!(check(b"{\\rtf1 hello}", &LIMITS), Ok(Inflation::default()));
    }

    #[test]
    fn a_zip64_marker_without_its_extra_field_is_damage_not_a_guess() {
        let mut zip = packages::docx("x");
        // The first central entry's compressed size set to the ZIP64 marker, with no extra field.
        let central = zip.windows(4).position(|w| w == [0x50, 0x4b, 0x01, 0x02]).unwrap();
        zip[central + 20..central + 24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(check(&zip, &LIMITS), Err(InflationError::Damaged(ZipError::DamagedEntry(0))));
        // Every truncation and corruption: an answer, never a panic.
        let docx = packages::docx("hello");
        for cut in 0..docx.len() {
            let _ = check(&docx[..cut], &LIMITS);
        }
        for at in 0..docx.len() {
            let mut bad = docx.clone();
            bad[at] ^= 0xff;
            let _ = check(&bad, &LIMITS);
        }
    }
}
