//! Encoding benchmark: renders real corpus pages at 150 dpi once, then times each encoder
//! (the service's choice per format and the alternatives it was chosen from) against a plain
//! default PNG encode (`image`'s PngEncoder of the page as RGBA) in the same process. Pages are
//! rendered as the service renders them, in PDFium's BGRA; the baseline gets an RGBA copy made
//! beforehand, so the swap is not charged to it.
//! Prints figures; asserts nothing about time. Run: cargo bench -p render-pod --bench encoding
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use image::ImageEncoder;
use png::{BitDepth, ColorType, Compression, Filter};

use render_pod::encode::png::PngFilters;
use render_pod::encode::png_filter::Filter as RowFilter;
use render_pod::encode::webp::{self, Libwebp};
use render_pod::encode::{self, ImageFormat, Pixels, Quality, pixels};
use render_pod::ops::{RenderSize, render::render_bgra, size};

/// Timed passes over all pages per encoder; the fastest counts.
const PASSES: u32 = 9;
const DPI: f32 = 150.0;

/// One way of encoding a frame.
type Encoder = dyn Fn(&Frame) -> Vec<u8>;

struct Frame {
    width: u32,
    height: u32,
    /// As rendered, for the service's encoders.
    bgra: Vec<u8>,
    /// The same page as RGBA, for the baseline and the `png` crate's RGBA variants.
    rgba: Vec<u8>,
    colour: bool,
}

/// (file, 1-based pages): text manual pages, a plot manual, colour and image pages.
fn pages() -> Vec<(&'static str, Vec<i32>)> {
    vec![
        ("pdf/R-intro.pdf", (1..=20).collect()),
        ("pdf/gnuplot.pdf", vec![1, 60, 120, 180, 240]),
        ("pdf/cmyk.pdf", vec![1]),
        ("pdf/palette.pdf", vec![1]),
        ("pdf/vector.pdf", vec![1]),
        ("pdf/masks.pdf", vec![1]),
    ]
}

/// Renders every page once; returns the frames and the mean render time per page.
fn render_all() -> (Vec<Frame>, Duration) {
    let pdfium = render_pod::pdfium_lib::bind().unwrap();
    let mut frames = Vec::new();
    let mut rendering = Duration::ZERO;
    for (file, numbers) in pages() {
        let doc = pdfium.load_pdf_from_file(&renderpool_testkit::corpus::path(file), None).unwrap();
        for number in numbers {
            let page = doc.pages().get(number - 1).unwrap();
            let (w, h) =
                size::pixel_size(page.width().value, page.height().value, RenderSize::Dpi(DPI))
                    .unwrap();
            let (w, h) = size::check_pixels(w, h, u64::MAX).unwrap();
            let start = Instant::now();
            let mut bgra = Vec::new();
            render_bgra(&page, w, h, &mut bgra).unwrap();
            rendering += start.elapsed();
            let colour = pixels::gray_if_neutral(&bgra).is_none();
            let rgba = pixels::bgra_to_rgba(&bgra);
            frames.push(Frame { width: w as u32, height: h as u32, bgra, rgba, colour });
        }
    }
    let per_page = rendering / frames.len() as u32;
    (frames, per_page)
}

/// Mean output bytes, and time per page of the fastest of `PASSES` passes over `frames` (the
/// fastest pass is the one least disturbed by other work on the machine).
fn measure(frames: &[&Frame], encode: &Encoder) -> (f64, Duration) {
    let mut bytes = 0usize;
    for frame in frames {
        bytes += encode(frame).len(); // also warms caches and allocators
    }
    let mut best = Duration::MAX;
    for _ in 0..PASSES {
        let start = Instant::now();
        for frame in frames {
            std::hint::black_box(encode(frame));
        }
        best = best.min(start.elapsed());
    }
    (bytes as f64 / frames.len() as f64, best / frames.len() as u32)
}

fn baseline_png(f: &Frame) -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new(&mut out)
        .write_image(&f.rgba, f.width, f.height, image::ExtendedColorType::Rgba8)
        .unwrap();
    out
}

/// Compression and row filter of an encode through the `png` crate.
#[derive(Clone, Copy)]
struct CrateSettings {
    compression: Compression,
    filter: Filter,
}

/// The `png` crate's fast mode with `filter`.
fn fast(filter: Filter) -> CrateSettings {
    CrateSettings { compression: Compression::Fast, filter }
}

/// Encodes `pixels` through the `png` crate, as the service did before its own row pipeline.
fn png_crate(pixels: &Pixels<'_>, f: &Frame, settings: CrateSettings) -> Vec<u8> {
    let (data, color) = match *pixels {
        Pixels::Gray(d) => (d, ColorType::Grayscale),
        Pixels::Rgb(d) => (d, ColorType::Rgb),
        Pixels::Rgba(d) => (d, ColorType::Rgba),
        Pixels::Bgra(_) => panic!("PNG has no BGRA layout"),
    };
    let mut out = Vec::with_capacity(data.len() / 8);
    let mut encoder = png::Encoder::new(&mut out, f.width, f.height);
    encoder.set_color(color);
    encoder.set_depth(BitDepth::Eight);
    encoder.set_compression(settings.compression);
    encoder.set_filter(settings.filter);
    let mut writer = encoder.write_header().unwrap();
    writer.write_image_data(data).unwrap();
    writer.finish().unwrap();
    out
}

/// The whole page as RGB, as the old path converted it before encoding.
fn rgb_plane(bgra: &[u8]) -> Vec<u8> {
    let mut rgb = vec![0u8; bgra.len() / pixels::BGRA * 3];
    pixels::bgra_to_rgb(bgra, &mut rgb);
    rgb
}

/// The old service path with `png` crate settings: a grey plane when neutral, else an RGB one,
/// each converted whole (with today's conversions, faster than the old ones), then filtered and
/// compressed by the crate.
fn png_crate_with(grey: CrateSettings, colour: CrateSettings) -> impl Fn(&Frame) -> Vec<u8> {
    move |f| match pixels::gray_if_neutral(&f.bgra) {
        Some(gray) => png_crate(&Pixels::Gray(&gray), f, grey),
        None => png_crate(&Pixels::Rgb(&rgb_plane(&f.bgra)), f, colour),
    }
}

/// The service's fused PNG encoder with other row filters (as in the service, a row equal to
/// the one above is written with Up, all zeros, whatever the filter).
fn fused(grey: RowFilter, colour: RowFilter) -> impl Fn(&Frame) -> Vec<u8> {
    move |f| {
        encode::png::encode_bgra(&f.bgra, f.width, f.height, PngFilters { grey, colour }).unwrap()
    }
}

fn service(format: ImageFormat, quality: Option<u8>) -> impl Fn(&Frame) -> Vec<u8> {
    let quality = quality.map(|q| Quality::new(u32::from(q)).unwrap());
    move |f| encode::encode_bgra(&f.bgra, f.width, f.height, format, quality).unwrap()
}

/// The JPEG service before it made grey pages' plane itself: a pass that only tests whether the
/// page is neutral (whole 32-bit lanes, as `pixels` does), then libjpeg-turbo given the BGRA and
/// told to keep one channel or 4:2:0 chroma.
fn jpeg_from_bgra(f: &Frame) -> Vec<u8> {
    use turbojpeg::{Compressor, Image, PixelFormat, Subsamp};
    let neutral = f.bgra.chunks(4096).all(|block| {
        let colour = block.chunks_exact(4).fold(0u32, |colour, p| {
            let w = u32::from_le_bytes([p[0], p[1], p[2], p[3]]);
            let b = w & 0xFF;
            colour | ((w & 0x00FF_FFFF) ^ (b | b << 8 | b << 16))
        });
        colour == 0
    });
    let mut compressor = Compressor::new().unwrap();
    compressor.set_quality(i32::from(encode::jpeg::DEFAULT_QUALITY.get())).unwrap();
    compressor.set_subsamp(if neutral { Subsamp::Gray } else { Subsamp::Sub2x2 }).unwrap();
    let (width, height) = (f.width as usize, f.height as usize);
    let pixels = f.bgra.as_slice();
    let image = Image { pixels, width, pitch: width * 4, height, format: PixelFormat::BGRA };
    compressor.compress_to_vec(image).unwrap()
}

/// libwebp as `how` on the page as rendered.
fn libwebp(how: Libwebp) -> impl Fn(&Frame) -> Vec<u8> {
    move |f| webp::encode_libwebp(&f.bgra, f.width, f.height, how).unwrap()
}

/// libwebp lossy at quality 80 with `method` effort.
fn lossy(method: i32) -> Libwebp {
    Libwebp::Lossy { quality: Quality::new(80).unwrap(), method }
}

fn main() {
    render_pod::malloc::tune(); // as the service's worker processes do
    let (frames, render_per_page) = render_all();
    let colour = frames.iter().filter(|f| f.colour).count();
    println!(
        "{} pages at {DPI} dpi ({} grey, {colour} colour); fastest of {PASSES} passes per encoder",
        frames.len(),
        frames.len() - colour
    );
    println!("render only: {:.1} ms/page (PDFium, RGBA)", ms(render_per_page));

    let candidates: Vec<(&str, Box<Encoder>)> = vec![
        ("png  service (fused; grey Up / RGB Paeth)", Box::new(service(ImageFormat::Png, None))),
        ("png  fused, None", Box::new(fused(RowFilter::None, RowFilter::None))),
        ("png  fused, Sub", Box::new(fused(RowFilter::Sub, RowFilter::Sub))),
        ("png  fused, Up", Box::new(fused(RowFilter::Up, RowFilter::Up))),
        ("png  fused, Average", Box::new(fused(RowFilter::Average, RowFilter::Average))),
        ("png  fused, Paeth", Box::new(fused(RowFilter::Paeth, RowFilter::Paeth))),
        (
            "png  old: crate fast; grey Up / RGB Paeth",
            Box::new(png_crate_with(fast(Filter::Up), fast(Filter::Paeth))),
        ),
        (
            "png  crate fast, Up, RGBA (no grey detection)",
            Box::new(|f: &Frame| png_crate(&Pixels::Rgba(&f.rgba), f, fast(Filter::Up))),
        ),
        (
            "png  crate fast, Up, grey/RGB",
            Box::new(png_crate_with(fast(Filter::Up), fast(Filter::Up))),
        ),
        (
            "png  crate fast, Sub, grey/RGB",
            Box::new(png_crate_with(fast(Filter::Sub), fast(Filter::Sub))),
        ),
        (
            "png  crate fast, Paeth, grey/RGB",
            Box::new(png_crate_with(fast(Filter::Paeth), fast(Filter::Paeth))),
        ),
        (
            "png  crate fast, Adaptive, grey/RGB",
            Box::new(png_crate_with(fast(Filter::Adaptive), fast(Filter::Adaptive))),
        ),
        (
            "png  crate balanced, Adaptive, grey/RGB",
            Box::new({
                let balanced =
                    CrateSettings { compression: Compression::Balanced, filter: Filter::Adaptive };
                png_crate_with(balanced, balanced)
            }),
        ),
        (
            "png  image PngEncoder zlib level 6, RGBA",
            Box::new(|f: &Frame| {
                let mut out = Vec::new();
                image::codecs::png::PngEncoder::new_with_quality(
                    &mut out,
                    image::codecs::png::CompressionType::Default,
                    image::codecs::png::FilterType::Adaptive,
                )
                .write_image(&f.rgba, f.width, f.height, image::ExtendedColorType::Rgba8)
                .unwrap();
                out
            }),
        ),
        (
            "grey detection + grey plane only",
            Box::new(|f: &Frame| pixels::gray_if_neutral(&f.bgra).unwrap_or_default()),
        ),
        ("RGB plane only", Box::new(|f: &Frame| rgb_plane(&f.bgra))),
        ("jpeg service (libjpeg-turbo q80, grey/BGRA)", Box::new(service(ImageFormat::Jpeg, None))),
        ("jpeg service q60", Box::new(service(ImageFormat::Jpeg, Some(60)))),
        ("jpeg old: neutral test, then BGRA to libjpeg-turbo", Box::new(jpeg_from_bgra)),
        (
            "webp service lossless (image-webp, grey/RGBA)",
            Box::new(service(ImageFormat::Webp, None)),
        ),
        (
            "webp old: lossless, every page swapped to RGBA",
            Box::new(|f: &Frame| {
                let rgba = pixels::bgra_to_rgba(&f.bgra);
                webp::encode_lossless(&Pixels::Rgba(&rgba), f.width, f.height).unwrap()
            }),
        ),
        ("webp lossless libwebp level 0", Box::new(libwebp(Libwebp::Lossless { level: 0 }))),
        ("webp lossless libwebp level 1", Box::new(libwebp(Libwebp::Lossless { level: 1 }))),
        ("webp service lossy (libwebp q80)", Box::new(service(ImageFormat::Webp, Some(80)))),
        ("webp lossy libwebp q80 method 0", Box::new(libwebp(lossy(0)))),
        ("webp lossy libwebp q80 method 2", Box::new(libwebp(lossy(2)))),
        ("webp lossy libwebp q80 method 4", Box::new(libwebp(lossy(4)))),
    ];
    // `cargo bench --bench encoding -- WORD...` keeps only the encoders whose name has a WORD.
    let words: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let candidates: Vec<_> = candidates
        .into_iter()
        .filter(|(name, _)| words.is_empty() || words.iter().any(|w| name.contains(w.as_str())))
        .collect();

    let groups: [(&str, Vec<&Frame>); 3] = [
        ("all pages", frames.iter().collect()),
        ("grey pages", frames.iter().filter(|f| !f.colour).collect()),
        ("colour pages", frames.iter().filter(|f| f.colour).collect()),
    ];
    for (group, set) in &groups {
        if set.is_empty() {
            continue;
        }
        let (base_bytes, base_time) = measure(set, &baseline_png);
        println!("\n== {group} ({}) ==", set.len());
        println!(
            "{:<46} {:>10} {:>9} {:>9} {:>8} {:>8} {:>12}",
            "encoder", "bytes/pg", "ms/pg", "pages/s", "speed x", "size x", "encode share"
        );
        let row = |name: &str, bytes: f64, time: Duration| {
            println!(
                "{name:<46} {bytes:>10.0} {:>9.2} {:>9.1} {:>8.2} {:>8.2} {:>11.0}%",
                ms(time),
                1.0 / time.as_secs_f64(),
                base_time.as_secs_f64() / time.as_secs_f64(),
                bytes / base_bytes,
                100.0 * time.as_secs_f64() / (time + render_per_page).as_secs_f64(),
            );
        };
        row("baseline: image PngEncoder default, RGBA", base_bytes, base_time);
        for (name, encode) in &candidates {
            let (bytes, time) = measure(set, encode.as_ref());
            row(name, bytes, time);
        }
    }
    println!("\nspeed x = baseline time / encoder time; size x = encoder bytes / baseline bytes;");
    println!("encode share = encode / (render + encode), with the mean render time above.");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
