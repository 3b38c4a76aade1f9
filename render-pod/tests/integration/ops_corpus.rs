//! The ops API on real PDFium and the real corpus: every PDF's info, text and page images match
//! the manifest; every bad file gives its typed error; the executor reuses the open document.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::pdfium_turn;
use render_pod::ops::{
    DocInfo, Document, Executor, ExtractOutput, ImageFormat, ImageOutput, Op, OpError, OpLimits,
    OpOutput, PageSelection, Quality, RenderSize,
};
use renderpool_testkit::corpus::{self, read};
use serde_json::Value;

/// The manifest's PDFs that PDFium opens, with their entries.
fn good_pdfs() -> Vec<(String, Value)> {
    let pdfs: Vec<_> = corpus::manifest()
        .iter()
        .filter(|(name, entry)| name.starts_with("pdf/") && entry.get("pages").is_some())
        .map(|(name, entry)| (name.clone(), entry.clone()))
        .collect();
    assert!(pdfs.len() >= 20, "corpus manifest lists {} PDFs", pdfs.len());
    pdfs
}

fn executor(limits: OpLimits) -> Executor {
    Executor::new(render_pod::pdfium_lib::bind().unwrap(), limits)
}

fn info(ex: &mut Executor, doc: &[u8], password: Option<&str>) -> Result<DocInfo, OpError> {
    match ex.execute(&Document::new(doc, password), &Op::Info)? {
        OpOutput::Info(info) => Ok(info),
        other => panic!("Info gave {other:?}"),
    }
}

fn extract(ex: &mut Executor, doc: &[u8], op: Op) -> Result<ExtractOutput, OpError> {
    match ex.execute(&Document::new(doc, None), &op)? {
        OpOutput::Text(text) => Ok(text),
        other => panic!("Extract gave {other:?}"),
    }
}

fn render(
    ex: &mut Executor,
    doc: &[u8],
    page: u32,
    size: RenderSize,
    format: ImageFormat,
) -> Result<ImageOutput, OpError> {
    render_at(ex, doc, page, size, format, None)
}

fn render_at(
    ex: &mut Executor,
    doc: &[u8],
    page: u32,
    size: RenderSize,
    format: ImageFormat,
    quality: Option<Quality>,
) -> Result<ImageOutput, OpError> {
    match ex.execute(&Document::new(doc, None), &Op::Render { page, size, format, quality })? {
        OpOutput::Image(image) => Ok(image),
        other => panic!("Render gave {other:?}"),
    }
}

fn decode(image: &ImageOutput) -> image::DynamicImage {
    let format = match image.format {
        ImageFormat::Png => image::ImageFormat::Png,
        ImageFormat::Jpeg => image::ImageFormat::Jpeg,
        ImageFormat::Webp => image::ImageFormat::WebP,
    };
    image::load_from_memory_with_format(&image.bytes, format).unwrap()
}

fn first_page_pt(entry: &Value) -> (f64, f64) {
    let size = entry["first_page_pt"].as_array().unwrap();
    (size[0].as_f64().unwrap(), size[1].as_f64().unwrap())
}

#[test]
fn info_gives_the_manifest_page_count_and_first_page_size() {
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits::default());
    for (name, entry) in good_pdfs() {
        let info = info(&mut ex, &read(&name), None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(i64::from(info.page_count), entry["pages"].as_i64().unwrap(), "{name}");
        assert_eq!(info.pages.len(), info.page_count as usize, "{name}");
        let (w, h) = first_page_pt(&entry);
        let first = info.pages[0];
        assert!(
            (f64::from(first.width_pt) - w).abs() <= 0.5
                && (f64::from(first.height_pt) - h).abs() <= 0.5,
            "{name}: first page {}x{} pt, manifest {w}x{h}",
            first.width_pt,
            first.height_pt
        );
        assert!([0, 90, 180, 270].contains(&first.rotation_degrees), "{name}");
        assert!(!info.encrypted, "{name}");
    }
}

#[test]
fn info_reads_metadata() {
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits::default());
    let info = info(&mut ex, &read("pdf/R-intro.pdf"), None).unwrap();
    // LaTeX (pdfTeX) always writes these two.
    assert!(info.metadata.get("producer").is_some_and(|p| !p.is_empty()), "{info:?}");
    assert!(info.metadata.contains_key("creation_date"), "{:?}", info.metadata);
}

#[test]
fn extract_of_page_one_contains_the_manifest_words() {
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits::default());
    let mut checked = 0;
    for (name, entry) in good_pdfs() {
        let words = entry["first_page_words"].as_array().unwrap();
        if words.is_empty() {
            continue;
        }
        let op = Op::Extract { pages: Some(PageSelection::parse("1").unwrap()), max_chars: None };
        let out = extract(&mut ex, &read(&name), op).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!out.truncated);
        assert_eq!(out.pages.len(), 1);
        assert_eq!(out.pages[0].page, 1);
        for word in words {
            let word = word.as_str().unwrap();
            assert!(out.pages[0].text.contains(word), "{name}: {word:?} not in page 1 text");
        }
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} files have words to check");
}

#[test]
fn extract_defaults_to_all_pages_and_caps_characters_on_a_char_boundary() {
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits::default());
    let doc = read("pdf/libtasn1.pdf");
    let all = extract(&mut ex, &doc, Op::Extract { pages: None, max_chars: None }).unwrap();
    assert_eq!(all.pages.iter().map(|p| p.page).collect::<Vec<_>>(), (1..=36).collect::<Vec<_>>());
    assert!(!all.truncated);
    let total: usize = all.pages.iter().map(|p| p.text.chars().count()).sum();
    assert!(total > 1000, "{total} characters in the whole manual");

    let capped =
        extract(&mut ex, &doc, Op::Extract { pages: None, max_chars: Some(1000) }).unwrap();
    assert!(capped.truncated);
    let kept: String = capped.pages.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(kept.chars().count(), 1000);
    let full: String = all.pages.iter().map(|p| p.text.as_str()).collect();
    assert!(full.starts_with(&kept));

    // A cap that exactly fits the selection is not a truncation.
    let two = Some(PageSelection::parse("1-2").unwrap());
    let exact: usize = all.pages[..2].iter().map(|p| p.text.chars().count()).sum();
    let out = extract(&mut ex, &doc, Op::Extract { pages: two, max_chars: Some(exact) }).unwrap();
    assert!(!out.truncated);
    assert_eq!(out.pages.len(), 2);
}

#[test]
fn extract_without_a_range_stops_at_the_page_limit_and_says_so() {
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits { max_pages: 10, ..OpLimits::default() });
    let doc = read("pdf/libtasn1.pdf"); // 36 pages
    let first = extract(&mut ex, &doc, Op::Extract { pages: None, max_chars: None }).unwrap();
    assert_eq!(
        first.pages.iter().map(|p| p.page).collect::<Vec<_>>(),
        (1..=10).collect::<Vec<_>>()
    );
    assert!(first.truncated);
    assert_eq!(first.page_count, 36);
    // Within the limit nothing is cut and the count is still given.
    let named = Some(PageSelection::parse("27-36").unwrap());
    let last = extract(&mut ex, &doc, Op::Extract { pages: named, max_chars: None }).unwrap();
    assert_eq!((last.pages.len(), last.truncated, last.page_count), (10, false, 36));
    // A range past the limit is the client's explicit ask: refused, not cut.
    let past = Some(PageSelection::parse("1-11").unwrap());
    let err = extract(&mut ex, &doc, Op::Extract { pages: past, max_chars: None }).unwrap_err();
    assert_eq!(err, OpError::TooManyPages { requested: 11, max: 10 });
}

#[test]
fn render_of_page_one_decodes_to_the_expected_size_in_every_format() {
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits::default());
    for (name, entry) in good_pdfs() {
        let doc = read(&name);
        let (w_pt, h_pt) = first_page_pt(&entry);
        let by_dpi = ((w_pt * 100.0 / 72.0).round() as u32, (h_pt * 100.0 / 72.0).round() as u32);
        let by_width = (320, (320.0 * h_pt / w_pt).round() as u32);
        for format in [ImageFormat::Png, ImageFormat::Jpeg, ImageFormat::Webp] {
            for (size, expected) in
                [(RenderSize::Dpi(100.0), by_dpi), (RenderSize::Width(320), by_width)]
            {
                let image = render(&mut ex, &doc, 1, size, format)
                    .unwrap_or_else(|e| panic!("{name} {size:?} {format}: {e}"));
                let decoded = decode(&image);
                let got = (decoded.width(), decoded.height());
                // Manifest sizes are rounded to 0.1 pt: allow one pixel of rounding.
                assert!(
                    got.0.abs_diff(expected.0) <= 1 && got.1.abs_diff(expected.1) <= 1,
                    "{name} {size:?} {format}: {got:?}, expected {expected:?}"
                );
                assert_eq!((image.width, image.height), got, "{name} {format}");
                assert_eq!(image.format, format);
            }
        }
    }
    // One document at a time, each parsed once for its six renders.
    assert_eq!(ex.document_loads(), good_pdfs().len() as u64);
}

#[test]
fn text_pages_are_encoded_grey_and_colour_pages_in_colour() {
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits::default());
    let text =
        render(&mut ex, &read("pdf/libtasn1.pdf"), 2, RenderSize::Dpi(72.0), ImageFormat::Png)
            .unwrap();
    assert_eq!(decode(&text).color(), image::ColorType::L8);
    let colour =
        render(&mut ex, &read("pdf/cmyk.pdf"), 1, RenderSize::Dpi(72.0), ImageFormat::Png).unwrap();
    let decoded = decode(&colour);
    assert_eq!(decoded.color(), image::ColorType::Rgb8);
    let rgb = decoded.to_rgb8();
    assert!(rgb.pixels().any(|p| p[0] != p[1] || p[1] != p[2]));
    let jpeg =
        render(&mut ex, &read("pdf/libtasn1.pdf"), 2, RenderSize::Dpi(72.0), ImageFormat::Jpeg)
            .unwrap();
    assert_eq!(decode(&jpeg).color(), image::ColorType::L8);
}

#[test]
fn a_blank_page_after_a_busy_one_comes_out_white() {
    // The executor reuses its bitmap buffer: nothing of the previous page may show through.
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits::default());
    render(&mut ex, &read("pdf/cmyk.pdf"), 1, RenderSize::Width(400), ImageFormat::Png).unwrap();
    let blank =
        render(&mut ex, &read("pdf/no_contents.pdf"), 1, RenderSize::Width(300), ImageFormat::Png)
            .unwrap();
    let decoded = decode(&blank).to_rgb8();
    assert!(decoded.pixels().all(|p| p.0 == [255, 255, 255]), "stale pixels in a blank page");
}

#[test]
fn colours_come_out_as_pdfium_renders_them_in_every_format() {
    let _turn = pdfium_turn();
    // The reference: pdfium-render's own RGBA image of the page, independent of our render
    // and encoders (PDFium renders BGRA; a swapped channel would show here).
    let pdfium = render_pod::pdfium_lib::bind().unwrap();
    let doc = pdfium.load_pdf_from_byte_vec(read("pdf/cmyk.pdf"), None).unwrap();
    let page = doc.pages().get(0).unwrap();
    let (w, h) = (page.width().value.round() as i32, page.height().value.round() as i32);
    let config = pdfium_render::prelude::PdfRenderConfig::new()
        .set_fixed_size(w, h)
        .set_clear_color(pdfium_render::prelude::PdfColor::WHITE);
    let reference = page.render_with_config(&config).unwrap().as_image().unwrap().to_rgb8();
    let mut ex = executor(OpLimits::default());
    // Lossless formats match exactly; lossy ones within a mean error that a swapped red and
    // blue (or a page of the wrong document) would be far above on this page.
    let encodings = [
        (ImageFormat::Png, None, 0.0),
        (ImageFormat::Webp, None, 0.0),
        (ImageFormat::Jpeg, None, 6.0),
        (ImageFormat::Jpeg, Quality::new(95), 3.0),
        (ImageFormat::Webp, Quality::new(80), 6.0),
        (ImageFormat::Webp, Quality::new(95), 4.0),
    ];
    for (format, quality, tolerance) in encodings {
        let size = RenderSize::Width(w as u32);
        let image = render_at(&mut ex, &read("pdf/cmyk.pdf"), 1, size, format, quality).unwrap();
        let ours = decode(&image).to_rgb8();
        assert_eq!(ours.dimensions(), reference.dimensions(), "{format} {quality:?}");
        let mean = mean_error(ours.as_raw(), reference.as_raw());
        assert!(mean <= tolerance, "{format} {quality:?}: mean channel error {mean}");
    }
}

/// The mean absolute difference of two equally long buffers of channel values.
fn mean_error(ours: &[u8], reference: &[u8]) -> f64 {
    assert_eq!(ours.len(), reference.len());
    let error: u64 = ours.iter().zip(reference).map(|(a, b)| u64::from(a.abs_diff(*b))).sum();
    error as f64 / ours.len() as f64
}

#[test]
fn lossy_text_pages_stay_close_to_the_render_and_lossless_ones_exact() {
    // Text pages of the corpus, each against its lossless PNG (the render itself, grey).
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits::default());
    let doc = read("pdf/R-intro.pdf");
    for page in [1, 12, 40] {
        let size = RenderSize::Dpi(150.0);
        let png = render(&mut ex, &doc, page, size, ImageFormat::Png).unwrap();
        let reference = decode(&png).to_luma8();
        for (format, quality, tolerance) in [
            (ImageFormat::Jpeg, None, 4.0),
            (ImageFormat::Jpeg, Quality::new(60), 6.0),
            (ImageFormat::Webp, Quality::new(80), 6.0),
            (ImageFormat::Webp, None, 0.0),
        ] {
            let image = render_at(&mut ex, &doc, page, size, format, quality).unwrap();
            let ours = decode(&image).to_luma8();
            assert_eq!(ours.dimensions(), reference.dimensions(), "page {page} {format}");
            let mean = mean_error(ours.as_raw(), reference.as_raw());
            assert!(mean <= tolerance, "page {page} {format} {quality:?}: mean error {mean}");
        }
    }
}

#[test]
fn page_rotation_is_honoured() {
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits::default());
    let mut rotated = 0;
    for (name, _) in good_pdfs() {
        let doc = read(&name);
        let info = info(&mut ex, &doc, None).unwrap();
        for (i, page) in info.pages.iter().enumerate().take(3) {
            let image =
                render(&mut ex, &doc, i as u32 + 1, RenderSize::Dpi(72.0), ImageFormat::Png)
                    .unwrap();
            // The image has the page's shape as displayed, turned or not.
            assert_eq!(
                (image.width, image.height),
                (page.width_pt.round() as u32, page.height_pt.round() as u32),
                "{name} page {}",
                i + 1
            );
            if page.rotation_degrees % 180 == 90 {
                rotated += 1;
            }
        }
    }
    // rotated_skew.pdf is a landscape MediaBox shown portrait by /Rotate.
    assert!(rotated >= 1, "the corpus has no quarter-turned page to check");
}

#[test]
fn bad_files_give_typed_errors() {
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits::default());
    for name in ["bad/empty.pdf", "bad/invalid.pdf", "bad/truncated-R-intro.pdf"] {
        for op in [Op::Info, Op::Extract { pages: None, max_chars: None }] {
            let err = ex.execute(&Document::new(&read(name), None), &op).unwrap_err();
            assert!(matches!(err, OpError::Unreadable { .. }), "{name}: {err:?}");
            assert_eq!((err.code(), err.status()), ("unreadable_document", 422));
        }
    }
    for name in ["bad/r2-user-password.pdf", "bad/r6-user-password.pdf"] {
        let doc = read(name);
        assert_eq!(info(&mut ex, &doc, None).unwrap_err(), OpError::PasswordRequired, "{name}");
        assert_eq!(info(&mut ex, &doc, Some("")).unwrap_err(), OpError::PasswordRequired, "{name}");
        assert_eq!(
            info(&mut ex, &doc, Some("wrong")).unwrap_err(),
            OpError::WrongPassword,
            "{name}"
        );
        let opened = info(&mut ex, &doc, Some("asdfzxcv")).unwrap();
        assert!(opened.encrypted, "{name}");
        assert!(opened.page_count >= 1, "{name}");
        let size = RenderSize::Width(200);
        let op = Op::Render { page: 1, size, format: ImageFormat::Png, quality: None };
        let image = ex.execute(&Document::new(&doc, Some("asdfzxcv")), &op).unwrap();
        assert!(matches!(image, OpOutput::Image(ImageOutput { width: 200, .. })), "{name}");
    }
    // After all that, the executor still serves a good document.
    assert_eq!(info(&mut ex, &read("pdf/trivial.pdf"), None).unwrap().page_count, 1);
}

#[test]
fn pages_past_the_end_are_out_of_range() {
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits::default());
    let doc = read("pdf/multipage.pdf");
    assert_eq!(
        render(&mut ex, &doc, 7, RenderSize::Dpi(72.0), ImageFormat::Png).unwrap_err(),
        OpError::PageOutOfRange { page: 7, page_count: 6 }
    );
    let op = Op::Extract { pages: Some(PageSelection::parse("5-9").unwrap()), max_chars: None };
    assert_eq!(
        extract(&mut ex, &doc, op).unwrap_err(),
        OpError::PageOutOfRange { page: 7, page_count: 6 }
    );
    assert!(render(&mut ex, &doc, 6, RenderSize::Dpi(72.0), ImageFormat::Png).is_ok());
}

#[test]
fn bad_requests_are_refused_before_the_document_is_parsed() {
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits { max_pixels: 40_000_000, max_pages: 10 });
    let doc = read("pdf/R-intro.pdf");
    for size in [
        RenderSize::Dpi(0.0),
        RenderSize::Dpi(1201.0),
        RenderSize::Width(0),
        RenderSize::Width(10_001),
    ] {
        let err = render(&mut ex, &doc, 1, size, ImageFormat::Png).unwrap_err();
        assert_eq!(err.code(), "invalid_request", "{size:?}");
        assert_eq!(err.status(), 400);
    }
    let err = render(&mut ex, &doc, 0, RenderSize::Dpi(72.0), ImageFormat::Png).unwrap_err();
    assert_eq!(err.code(), "invalid_request");
    let op = Op::Extract { pages: Some(PageSelection::parse("1-11").unwrap()), max_chars: None };
    assert_eq!(
        extract(&mut ex, &doc, op).unwrap_err(),
        OpError::TooManyPages { requested: 11, max: 10 }
    );
    assert_eq!(ex.document_loads(), 0, "a bad request made the executor parse the document");
}

#[test]
fn too_many_pixels_is_refused_before_rendering() {
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits { max_pixels: 4_000_000, max_pages: 500 });
    let doc = read("pdf/R-intro.pdf");
    // 612x792 pt at 1200 dpi is 10200x13200: 134.6 megapixels, a 538 MB bitmap.
    assert_eq!(
        render(&mut ex, &doc, 1, RenderSize::Dpi(1200.0), ImageFormat::Png).unwrap_err(),
        OpError::TooManyPixels { width: 10_200, height: 13_200, max_pixels: 4_000_000 }
    );
    // Just under the budget renders.
    let ok = render(&mut ex, &doc, 1, RenderSize::Width(1700), ImageFormat::Jpeg).unwrap();
    assert_eq!((ok.width, ok.height), (1700, 2200));
}

#[test]
fn the_executor_reuses_the_open_document() {
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits::default());
    let r_intro = read("pdf/R-intro.pdf");
    let gnuplot = read("pdf/gnuplot.pdf");
    for page in 1..=5 {
        render(&mut ex, &r_intro, page, RenderSize::Width(100), ImageFormat::Png).unwrap();
    }
    info(&mut ex, &r_intro, None).unwrap();
    assert_eq!(ex.document_loads(), 1, "five renders and an info of one document");
    render(&mut ex, &gnuplot, 1, RenderSize::Width(100), ImageFormat::Png).unwrap();
    assert_eq!(ex.document_loads(), 2);
    render(&mut ex, &r_intro, 6, RenderSize::Width(100), ImageFormat::Png).unwrap();
    assert_eq!(ex.document_loads(), 3, "only the last document is kept");
    // Same bytes, other password: parsed again (the password is part of the key).
    info(&mut ex, &r_intro, Some("x")).unwrap();
    assert_eq!(ex.document_loads(), 4);
    // A one-byte change is another document.
    let mut changed = r_intro.clone();
    changed.push(b'\n');
    info(&mut ex, &changed, Some("x")).unwrap();
    assert_eq!(ex.document_loads(), 5);
}

#[test]
fn watermark_output_reopens_with_the_text_on_every_page() {
    let _turn = pdfium_turn();
    let mut ex = executor(OpLimits::default());
    for name in
        ["pdf/multipage.pdf", "pdf/rotated_skew.pdf", "pdf/libtasn1.pdf", "pdf/no_contents.pdf"]
    {
        let original = read(name);
        let OpOutput::Pdf(marked) = ex
            .execute(
                &Document::new(&original, None),
                &Op::Watermark { text: "CONFIDENTIAL draft".into() },
            )
            .unwrap()
        else {
            panic!("Watermark gave no PDF")
        };
        assert!(marked.starts_with(b"%PDF-"), "{name}");
        let before = info(&mut ex, &original, None).unwrap();
        let after = info(&mut ex, &marked, None).unwrap();
        assert_eq!(after.pages, before.pages, "{name}: page sizes changed");
        let text = extract(&mut ex, &marked, Op::Extract { pages: None, max_chars: None }).unwrap();
        assert_eq!(text.pages.len(), before.page_count as usize);
        for page in &text.pages {
            assert!(
                page.text.contains("CONFIDENTIAL draft"),
                "{name} page {}: {:?}",
                page.page,
                page.text.chars().take(200).collect::<String>()
            );
        }
        // The stamp is visible: the watermarked page 1 renders differently.
        let size = RenderSize::Width(200);
        let a = render(&mut ex, &original, 1, size, ImageFormat::Png).unwrap();
        let b = render(&mut ex, &marked, 1, size, ImageFormat::Png).unwrap();
        assert_ne!(decode(&a).to_luma8().into_raw(), decode(&b).to_luma8().into_raw(), "{name}");
    }
    let err = ex.execute(
        &Document::new(&read("pdf/trivial.pdf"), None),
        &Op::Watermark { text: " ".into() },
    );
    assert_eq!(err.unwrap_err().code(), "invalid_request");
}
