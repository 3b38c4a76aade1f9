//! Where a job's outputs go and what its manifest says. Every key is derived from the job and
//! the operation (and the page), so a job delivered again writes the same objects, never a
//! second set; the manifest is written last.

use renderpool_api::jobs::{JobId, ObjectUrl, OutputObject};

use crate::ops::ImageFormat;

/// The folder of job `id`'s outputs: `<output prefix>/<id>`.
pub fn job_folder(output: &ObjectUrl, id: &JobId) -> ObjectUrl {
    output.join(id.as_str())
}

/// The manifest: `<job folder>/manifest.json`.
pub fn manifest(folder: &ObjectUrl) -> ObjectUrl {
    folder.join("manifest.json")
}

/// The one output of operation `index` named `op`, with extension `ext`:
/// `<job folder>/<index>-<op>.<ext>` (`01-info.json`).
pub fn single(folder: &ObjectUrl, index: usize, op: &str, ext: &str) -> ObjectUrl {
    folder.join(&format!("{index:02}-{op}.{ext}"))
}

/// Page `page` of operation `index`: `<job folder>/<index>-<op>/page-<page>.<ext>`, the page
/// number zero-padded so a listing sorts in page order.
pub fn page(
    folder: &ObjectUrl,
    index: usize,
    op: &str,
    page: u32,
    format: ImageFormat,
) -> ObjectUrl {
    folder.join(&format!("{index:02}-{op}/page-{page:05}.{}", extension(format)))
}

/// The file extension of an image format.
pub fn extension(format: ImageFormat) -> &'static str {
    match format {
        ImageFormat::Png => "png",
        ImageFormat::Jpeg => "jpg",
        ImageFormat::Webp => "webp",
    }
}

/// An output as the manifest lists it.
pub fn listed(url: &ObjectUrl, bytes: u64, content_type: &str) -> OutputObject {
    OutputObject {
        url: url.to_string(),
        bytes,
        content_type: content_type.to_string(),
        page: None,
        width: None,
        height: None,
    }
}

/// Formats Unix milliseconds as RFC 3339 in UTC (`2026-12-03T08:00:00.000Z`).
pub fn rfc3339(unix_ms: u64) -> String {
    let (days, ms_of_day) = (unix_ms / 86_400_000, unix_ms % 86_400_000);
    // Howard Hinnant's days-to-civil, for days since 1970-01-01.
    let z = i64::try_from(days).unwrap_or(i64::MAX / 2) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let secs = ms_of_day / 1000;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        ms_of_day % 1000
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn keys_come_from_the_job_the_operation_and_the_page() {
        let output = ObjectUrl::parse("s3://results/batch/").unwrap();
        let id = JobId::from_key("k");
        let folder = job_folder(&output, &id);
        assert_eq!(folder.to_string(), format!("s3://results/batch/{id}"));
        assert_eq!(manifest(&folder).key, format!("batch/{id}/manifest.json"));
        assert_eq!(single(&folder, 1, "info", "json").key, format!("batch/{id}/01-info.json"));
        assert_eq!(
            page(&folder, 2, "render", 7, ImageFormat::Jpeg).key,
            format!("batch/{id}/02-render/page-00007.jpg")
        );
        // The same job and operation always name the same object.
        assert_eq!(
            page(&folder, 2, "render", 7, ImageFormat::Jpeg),
            page(&folder, 2, "render", 7, ImageFormat::Jpeg)
        );
        let root = ObjectUrl::parse("s3://results").unwrap();
        assert_eq!(job_folder(&root, &id).key, id.to_string());
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
    }
}
