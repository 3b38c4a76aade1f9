//! Query parameters of the document routes, parsed and bounded before any work: one parser per
//! route, so what a route reads is what its parser reads (the OpenAPI test lists it).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::office::{ConvertOptions, PdfA};
use crate::ops::{ImageFormat, Op, OpError, PageSelection, Quality, RenderSize, size};

use super::error::ApiError;

/// Query parameters by name. In unit tests it also records the names asked for, which is how
/// the OpenAPI test learns each route's parameters from its parser.
#[derive(Debug, Default, Deserialize)]
#[serde(transparent)]
pub struct Query {
    values: BTreeMap<String, String>,
    #[cfg(test)]
    #[serde(skip)]
    asked: std::cell::RefCell<std::collections::BTreeSet<&'static str>>,
}

impl Query {
    /// The query string of `uri`, parsed into names and values.
    pub fn of_uri(uri: &axum::http::Uri) -> Result<Self, ApiError> {
        axum::extract::Query::<Query>::try_from_uri(uri)
            .map(|q| q.0)
            .map_err(|e| ApiError::invalid(e.body_text()))
    }

    pub(super) fn get(&self, name: &'static str) -> Option<&String> {
        #[cfg(test)]
        self.asked.borrow_mut().insert(name);
        self.values.get(name)
    }

    /// The names asked for so far.
    #[cfg(test)]
    pub fn asked(&self) -> std::collections::BTreeSet<&'static str> {
        self.asked.borrow().clone()
    }
}

#[cfg(test)]
impl<const N: usize> From<[(&str, &str); N]> for Query {
    fn from(pairs: [(&str, &str); N]) -> Self {
        let values = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Self { values, asked: Default::default() }
    }
}

/// `POST /v1/extract?pages=&max_chars=`.
pub fn extract(query: &Query, max_pages: u32) -> Result<Op, ApiError> {
    Ok(Op::Extract { pages: pages(query, max_pages)?, max_chars: max_chars(query)? })
}

/// `POST /v1/render?page=&dpi=|width=&format=&quality=`.
pub fn render(query: &Query) -> Result<Op, ApiError> {
    let (format, quality) = encoding(query)?;
    Ok(Op::Render {
        page: page(query)?,
        size: render_size(query, RenderSize::Dpi(size::DEFAULT_DPI))?,
        format,
        quality,
    })
}

/// A filmstrip's selection, each page's size and how each is encoded.
pub type Filmstrip = (Option<PageSelection>, RenderSize, ImageFormat, Option<Quality>);

/// `POST /v1/thumbnails?pages=&width=|dpi=&format=&quality=`.
pub fn thumbnails(
    query: &Query,
    max_pages: u32,
    caps: ThumbnailLimits,
) -> Result<Filmstrip, ApiError> {
    let (format, quality) = encoding(query)?;
    Ok((pages(query, max_pages)?, thumbnail_size(query, caps)?, format, quality))
}

/// `POST /v1/watermark?text=`.
pub fn watermark(query: &Query) -> Result<Op, ApiError> {
    Ok(Op::Watermark { text: watermark_text(query)? })
}

/// `POST /v1/convert?pdfa=&pages=`.
pub fn convert(query: &Query, max_pages: u32) -> Result<ConvertOptions, ApiError> {
    Ok(ConvertOptions { pdfa: pdfa(query)?, pages: pages(query, max_pages)? })
}

/// Default filmstrip thumbnail width.
pub const DEFAULT_THUMBNAIL_WIDTH: u32 = 160;
/// Caps on a filmstrip (`/v1/thumbnails`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThumbnailLimits {
    /// Widest page, in pixels, for `width=`.
    pub max_width: u32,
    /// Highest resolution, for `dpi=`.
    pub max_dpi: f32,
    /// Most pixels of all pages together in the JSON form (which is held whole until sent).
    pub max_pixels: u64,
}

/// Longest accepted watermark text, in characters.
pub const MAX_WATERMARK_CHARS: usize = 200;

fn number<T: std::str::FromStr>(query: &Query, name: &'static str) -> Result<Option<T>, ApiError> {
    query
        .get(name)
        .map(|v| {
            v.trim()
                .parse::<T>()
                .map_err(|_| ApiError::invalid(format!("{name}={v:?} is not a valid number")))
        })
        .transpose()
}

/// `dpi=` or `width=` (not both), else `default`; range-checked.
fn render_size(query: &Query, default: RenderSize) -> Result<RenderSize, ApiError> {
    let size = match (number::<f32>(query, "dpi")?, number::<u32>(query, "width")?) {
        (Some(_), Some(_)) => return Err(ApiError::invalid("give dpi or width, not both")),
        (Some(dpi), None) => RenderSize::Dpi(dpi),
        (None, Some(width)) => RenderSize::Width(width),
        (None, None) => default,
    };
    size::validate(size)?;
    Ok(size)
}

/// `dpi=` or `width=` for a filmstrip page, default [`DEFAULT_THUMBNAIL_WIDTH`], within `caps`.
fn thumbnail_size(query: &Query, caps: ThumbnailLimits) -> Result<RenderSize, ApiError> {
    let size = render_size(query, RenderSize::Width(DEFAULT_THUMBNAIL_WIDTH))?;
    match size {
        RenderSize::Width(width) if width > caps.max_width => Err(ApiError::invalid(format!(
            "thumbnails are at most {} pixels wide (--thumbnail-max-width), got width={width}: use /v1/render for a large page",
            caps.max_width
        ))),
        RenderSize::Dpi(dpi) if dpi > caps.max_dpi => Err(ApiError::invalid(format!(
            "thumbnails are rendered at {} dpi at most (--thumbnail-max-dpi), got dpi={dpi}: use /v1/render for a large page",
            caps.max_dpi
        ))),
        _ => Ok(size),
    }
}

/// Refuses a JSON filmstrip whose pages come to more than `max` pixels in all.
pub fn check_output_pixels(pixels: u64, max: u64) -> Result<(), ApiError> {
    if pixels <= max {
        return Ok(());
    }
    Err(ApiError::new(
        axum::http::StatusCode::UNPROCESSABLE_ENTITY,
        "output_too_large",
        format!(
            "these thumbnails come to {pixels} pixels, more than {max} in one JSON answer: ask for fewer pages or a smaller size, or stream them (Accept: application/x-ndjson)"
        ),
    ))
}

/// `format=` (png, jpeg, webp), default png.
fn format(query: &Query) -> Result<ImageFormat, ApiError> {
    match query.get("format") {
        None => Ok(ImageFormat::Png),
        Some(f) => {
            f.parse().map_err(|e: crate::encode::UnknownFormat| ApiError::invalid(e.to_string()))
        }
    }
}

/// `format=` and `quality=` (1 to 100): JPEG at 80 unless given, WebP lossless unless given
/// (lossy at it when given); PNG takes none.
fn encoding(query: &Query) -> Result<(ImageFormat, Option<Quality>), ApiError> {
    let format = format(query)?;
    let Some(quality) = number::<u32>(query, "quality")? else {
        return Ok((format, None));
    };
    if !format.takes_quality() {
        return Err(ApiError::invalid(format!(
            "quality= applies to jpeg and webp; {format} is lossless"
        )));
    }
    let quality = Quality::new(quality)
        .ok_or_else(|| ApiError::invalid(format!("quality={quality} is not 1 to 100")))?;
    Ok((format, Some(quality)))
}

/// `page=` for `/v1/render`, default 1.
fn page(query: &Query) -> Result<u32, ApiError> {
    match number::<u32>(query, "page")? {
        None => Ok(1),
        Some(0) => Err(ApiError::invalid("pages are numbered from 1")),
        Some(page) => Ok(page),
    }
}

/// `pages=` as a selection, refused when it names more than `max_pages`.
fn pages(query: &Query, max_pages: u32) -> Result<Option<PageSelection>, ApiError> {
    let Some(value) = query.get("pages") else {
        return Ok(None);
    };
    let selection = PageSelection::parse(value)?;
    check_page_count(selection.count(), max_pages)?;
    Ok(Some(selection))
}

/// Refuses a request for more than `max_pages` pages.
pub fn check_page_count(requested: u64, max_pages: u32) -> Result<(), ApiError> {
    if requested > u64::from(max_pages) {
        return Err(OpError::TooManyPages { requested, max: max_pages }.into());
    }
    Ok(())
}

/// `pdfa=` for `/v1/convert` (1b, 2b or 3b).
fn pdfa(query: &Query) -> Result<Option<PdfA>, ApiError> {
    query
        .get("pdfa")
        .map(|v| v.parse::<PdfA>().map_err(|e| ApiError::invalid(e.to_string())))
        .transpose()
}

/// `max_chars=` for `/v1/extract`.
fn max_chars(query: &Query) -> Result<Option<usize>, ApiError> {
    number::<usize>(query, "max_chars")
}

/// `text=` for `/v1/watermark`: required, non-blank, bounded.
fn watermark_text(query: &Query) -> Result<String, ApiError> {
    let text = query.get("text").map(|t| t.trim()).unwrap_or("");
    if text.is_empty() {
        return Err(ApiError::invalid("text= is required: the watermark to stamp on every page"));
    }
    if text.chars().count() > MAX_WATERMARK_CHARS {
        return Err(ApiError::invalid(format!(
            "watermark text is longer than {MAX_WATERMARK_CHARS} characters"
        )));
    }
    Ok(text.to_string())
}

impl From<BTreeMap<String, String>> for Query {
    fn from(values: BTreeMap<String, String>) -> Self {
        Self {
            values,
            #[cfg(test)]
            asked: Default::default(),
        }
    }
}

/// The pages a job's render names: the route's one `page=`, or several with `pages=`.
#[derive(Debug, Clone, PartialEq)]
pub enum JobPages {
    /// One page.
    One(u32),
    /// A selection, resolved against the document's page count when it runs.
    Selection(PageSelection),
}

/// A job's operation, read by its HTTP route's parsers (the same names, bounds and messages).
#[derive(Debug, Clone, PartialEq)]
pub enum JobOperation {
    /// `/v1/info`.
    Info,
    /// `/v1/extract`: an [`Op::Extract`].
    Extract(Op),
    /// `/v1/render`: one image per page.
    Render { pages: JobPages, size: RenderSize, format: ImageFormat, quality: Option<Quality> },
    /// `/v1/thumbnails`: one image per page (all when `None`), within the filmstrip caps per
    /// page (each page is an object of its own, so the JSON form's pixel cap does not apply).
    Thumbnails {
        pages: Option<PageSelection>,
        size: RenderSize,
        format: ImageFormat,
        quality: Option<Quality>,
    },
    /// `/v1/watermark`: an [`Op::Watermark`].
    Watermark(Op),
    /// `/v1/convert`.
    Convert(ConvertOptions),
}

/// Reads a job's operation `name` with parameters `query` through its route's parser.
pub fn job_operation(
    name: &str,
    query: &Query,
    max_pages: u32,
    caps: ThumbnailLimits,
) -> Result<JobOperation, ApiError> {
    Ok(match name {
        "info" => JobOperation::Info,
        "extract" => JobOperation::Extract(extract(query, max_pages)?),
        "render" => {
            let several = pages(query, max_pages)?;
            let Op::Render { page, size, format, quality } = render(query)? else {
                return Err(ApiError::internal("the render parser made another operation"));
            };
            let pages = match several {
                Some(_) if query.get("page").is_some() => {
                    return Err(ApiError::invalid("give page or pages, not both"));
                }
                Some(selection) => JobPages::Selection(selection),
                None => JobPages::One(page),
            };
            JobOperation::Render { pages, size, format, quality }
        }
        "thumbnails" => {
            let (pages, size, format, quality) = thumbnails(query, max_pages, caps)?;
            JobOperation::Thumbnails { pages, size, format, quality }
        }
        "watermark" => JobOperation::Watermark(watermark(query)?),
        "convert" => JobOperation::Convert(convert(query, max_pages)?),
        other => return Err(ApiError::invalid(format!("no operation {other:?}"))),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn q<const N: usize>(pairs: &[(&str, &str); N]) -> Query {
        Query::from(*pairs)
    }

    #[test]
    fn render_size_choices() {
        let dflt = RenderSize::Dpi(size::DEFAULT_DPI);
        assert_eq!(render_size(&q(&[]), dflt).unwrap(), dflt);
        assert_eq!(render_size(&q(&[("dpi", "72")]), dflt).unwrap(), RenderSize::Dpi(72.0));
        assert_eq!(render_size(&q(&[("width", "300")]), dflt).unwrap(), RenderSize::Width(300));
        assert_eq!(
            render_size(&q(&[("dpi", "72"), ("width", "3")]), dflt).unwrap_err().code,
            "invalid_request"
        );
        assert_eq!(render_size(&q(&[("dpi", "abc")]), dflt).unwrap_err().code, "invalid_request");
        assert_eq!(
            render_size(&q(&[("dpi", "100000")]), dflt).unwrap_err().code,
            "invalid_request"
        );
    }

    #[test]
    fn thumbnails_are_capped_per_page_and_in_all() {
        let caps = ThumbnailLimits { max_width: 1200, max_dpi: 150.0, max_pixels: 1_000 };
        assert_eq!(
            thumbnail_size(&q(&[]), caps).unwrap(),
            RenderSize::Width(DEFAULT_THUMBNAIL_WIDTH)
        );
        assert_eq!(
            thumbnail_size(&q(&[("width", "1200")]), caps).unwrap(),
            RenderSize::Width(1200)
        );
        assert_eq!(thumbnail_size(&q(&[("dpi", "150")]), caps).unwrap(), RenderSize::Dpi(150.0));
        for over in [("width", "1201"), ("width", "3000"), ("dpi", "150.5")] {
            assert_eq!(thumbnail_size(&q(&[over]), caps).unwrap_err().code, "invalid_request");
        }
        assert!(check_output_pixels(1_000, caps.max_pixels).is_ok());
        let e = check_output_pixels(1_001, caps.max_pixels).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (422, "output_too_large"));
    }

    #[test]
    fn format_and_page() {
        assert_eq!(format(&q(&[])).unwrap(), ImageFormat::Png);
        assert_eq!(format(&q(&[("format", "JPG")])).unwrap(), ImageFormat::Jpeg);
        assert!(format(&q(&[("format", "gif")])).is_err());
        assert_eq!(encoding(&q(&[])).unwrap(), (ImageFormat::Png, None));
        assert_eq!(encoding(&q(&[("format", "webp")])).unwrap(), (ImageFormat::Webp, None));
        let lossy = encoding(&q(&[("format", "webp"), ("quality", "75")])).unwrap();
        assert_eq!(lossy, (ImageFormat::Webp, Quality::new(75)));
        let jpeg = encoding(&q(&[("format", "jpeg"), ("quality", "100")])).unwrap();
        assert_eq!(jpeg, (ImageFormat::Jpeg, Quality::new(100)));
        for bad in [[("format", "png"), ("quality", "80")], [("format", "jpeg"), ("quality", "0")]]
        {
            assert_eq!(encoding(&q(&bad)).unwrap_err().code, "invalid_request", "{bad:?}");
        }
        assert!(encoding(&q(&[("format", "webp"), ("quality", "101")])).is_err());
        assert!(encoding(&q(&[("quality", "high")])).is_err());
        assert_eq!(page(&q(&[])).unwrap(), 1);
        assert_eq!(page(&q(&[("page", "3")])).unwrap(), 3);
        assert!(page(&q(&[("page", "0")])).is_err());
        assert!(page(&q(&[("page", "-1")])).is_err());
    }

    #[test]
    fn page_selection_is_bounded_before_work() {
        assert!(pages(&q(&[]), 10).unwrap().is_none());
        assert_eq!(pages(&q(&[("pages", "1-3,7")]), 10).unwrap().unwrap().count(), 4);
        let e = pages(&q(&[("pages", "1-1000000")]), 500).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (422, "too_many_pages"));
        assert_eq!(pages(&q(&[("pages", "0-2")]), 10).unwrap_err().code, "invalid_request");
    }

    #[test]
    fn watermark_text_is_required_and_bounded() {
        assert_eq!(watermark_text(&q(&[("text", " DRAFT ")])).unwrap(), "DRAFT");
        assert!(watermark_text(&q(&[])).is_err());
        assert!(watermark_text(&q(&[("text", &"x".repeat(201))])).is_err());
        assert_eq!(max_chars(&q(&[("max_chars", "10")])).unwrap(), Some(10));
    }

    #[test]
    fn job_operations_are_read_by_the_routes_parsers() {
        let caps = ThumbnailLimits { max_width: 1200, max_dpi: 150.0, max_pixels: 1 };
        let read = |name: &str, pairs: &[(&str, &str)]| {
            let values: BTreeMap<String, String> =
                pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            job_operation(name, &Query::from(values), 10, caps)
        };
        assert_eq!(read("info", &[]).unwrap(), JobOperation::Info);
        let one = read("render", &[("page", "3"), ("width", "200")]).unwrap();
        assert_eq!(
            one,
            JobOperation::Render {
                pages: JobPages::One(3),
                size: RenderSize::Width(200),
                format: ImageFormat::Png,
                quality: None,
            }
        );
        let several = read("render", &[("pages", "1-4")]).unwrap();
        assert!(
            matches!(several, JobOperation::Render { pages: JobPages::Selection(s), .. } if s.count() == 4)
        );
        assert_eq!(
            read("render", &[("page", "1"), ("pages", "1-2")]).unwrap_err().code,
            "invalid_request"
        );
        assert_eq!(read("render", &[("pages", "1-11")]).unwrap_err().code, "too_many_pages");
        assert_eq!(read("render", &[("dpi", "5000")]).unwrap_err().code, "invalid_request");
        // The filmstrip's per-page caps hold; its JSON pixel cap (1 here) does not.
        assert!(read("thumbnails", &[("width", "300")]).is_ok());
        assert_eq!(read("thumbnails", &[("width", "1300")]).unwrap_err().code, "invalid_request");
        assert_eq!(read("watermark", &[]).unwrap_err().code, "invalid_request");
        assert!(read("convert", &[("pdfa", "2b")]).is_ok());
        assert_eq!(read("explode", &[]).unwrap_err().code, "invalid_request");
    }

    #[test]
    fn pdfa_is_optional_and_checked() {
        assert_eq!(pdfa(&q(&[])).unwrap(), None);
        assert_eq!(pdfa(&q(&[("pdfa", "2b")])).unwrap(), Some(PdfA::A2b));
        assert_eq!(pdfa(&q(&[("pdfa", "4z")])).unwrap_err().code, "invalid_request");
    }
}
