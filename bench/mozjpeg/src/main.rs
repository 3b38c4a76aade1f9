//! mozjpeg (`set_fastest_defaults`: no trellis quantisation, no progressive scans, quality 80)
//! against a default PNG encode (`image`'s PngEncoder of the page as RGBA), on the pages and with
//! the method of `render-pod/benches/encoding.rs` (150 dpi, fastest of 9 passes, grey pages fed
//! as one channel, colour pages as BGRA), so its "speed x" column reads the same. Needs
//! `PDFIUM_LIB_PATH` and `RENDERPOOL_CORPUS` (`scripts/setup.sh --cluster` prints both).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use image::ImageEncoder;
use pdfium_render::prelude::{PdfBitmap, PdfBitmapFormat, PdfColor, PdfRenderConfig, Pdfium};

const PASSES: u32 = 9;

struct Frame {
    width: u32,
    height: u32,
    bgra: Vec<u8>,
    rgba: Vec<u8>,
    grey: Option<Vec<u8>>,
}

fn frames() -> Vec<Frame> {
    let lib = std::env::var("PDFIUM_LIB_PATH").expect("PDFIUM_LIB_PATH");
    let corpus = std::env::var("RENDERPOOL_CORPUS").expect("RENDERPOOL_CORPUS");
    let pdfium = Pdfium::new(Pdfium::bind_to_library(&lib).unwrap());
    let pages: [(&str, Vec<i32>); 6] = [
        ("pdf/R-intro.pdf", (1..=20).collect()),
        ("pdf/gnuplot.pdf", vec![1, 60, 120, 180, 240]),
        ("pdf/cmyk.pdf", vec![1]),
        ("pdf/palette.pdf", vec![1]),
        ("pdf/vector.pdf", vec![1]),
        ("pdf/masks.pdf", vec![1]),
    ];
    let mut out = Vec::new();
    for (file, numbers) in pages {
        let doc = pdfium.load_pdf_from_file(&format!("{corpus}/{file}"), None).unwrap();
        for number in numbers {
            let page = doc.pages().get(number - 1).unwrap();
            let width = (page.width().value * 150.0 / 72.0).round() as i32;
            let height = (page.height().value * 150.0 / 72.0).round() as i32;
            let mut bgra = vec![0u8; (width * height * 4) as usize];
            {
                let mut bitmap =
                    PdfBitmap::from_bytes(width, height, PdfBitmapFormat::BGRA, &mut bgra).unwrap();
                let config = PdfRenderConfig::new()
                    .set_fixed_size(width, height)
                    .set_reverse_byte_order(false)
                    .set_clear_color(PdfColor::WHITE);
                page.render_into_bitmap_with_config(&mut bitmap, &config).unwrap();
            }
            let rgba: Vec<u8> =
                bgra.chunks_exact(4).flat_map(|p| [p[2], p[1], p[0], p[3]]).collect();
            let neutral = bgra.chunks_exact(4).all(|p| p[0] == p[1] && p[1] == p[2]);
            let grey = neutral.then(|| bgra.chunks_exact(4).map(|p| p[0]).collect());
            out.push(Frame { width: width as u32, height: height as u32, bgra, rgba, grey });
        }
    }
    out
}

fn baseline(f: &Frame) -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new(&mut out)
        .write_image(&f.rgba, f.width, f.height, image::ExtendedColorType::Rgba8)
        .unwrap();
    out
}

fn mozjpeg_fastest(f: &Frame) -> Vec<u8> {
    let (space, data) = match &f.grey {
        Some(grey) => (mozjpeg::ColorSpace::JCS_GRAYSCALE, &grey[..]),
        None => (mozjpeg::ColorSpace::JCS_EXT_BGRA, &f.bgra[..]),
    };
    let mut compress = mozjpeg::Compress::new(space);
    compress.set_size(f.width as usize, f.height as usize);
    compress.set_fastest_defaults();
    compress.set_quality(80.0);
    let mut started = compress.start_compress(Vec::new()).unwrap();
    started.write_scanlines(data).unwrap();
    started.finish().unwrap()
}

/// Mean bytes and the fastest pass's time per page.
fn measure(frames: &[&Frame], encode: fn(&Frame) -> Vec<u8>) -> (f64, Duration) {
    let bytes: usize = frames.iter().map(|f| encode(f).len()).sum();
    let best = (0..PASSES)
        .map(|_| {
            let start = Instant::now();
            for f in frames {
                std::hint::black_box(encode(f));
            }
            start.elapsed()
        })
        .min()
        .unwrap();
    (bytes as f64 / frames.len() as f64, best / frames.len() as u32)
}

fn main() {
    let frames = frames();
    let groups: [(&str, Vec<&Frame>); 3] = [
        ("all pages", frames.iter().collect()),
        ("grey pages", frames.iter().filter(|f| f.grey.is_some()).collect()),
        ("colour pages", frames.iter().filter(|f| f.grey.is_none()).collect()),
    ];
    for (name, set) in &groups {
        let (base_bytes, base_time) = measure(set, baseline);
        let (bytes, time) = measure(set, mozjpeg_fastest);
        println!(
            "{name} ({}): mozjpeg fastest q80 {:.2} ms/page, {:.0} bytes/page; speed x {:.2}, size x {:.2} against a default PNG encode ({:.2} ms/page)",
            set.len(),
            time.as_secs_f64() * 1e3,
            bytes,
            base_time.as_secs_f64() / time.as_secs_f64(),
            bytes / base_bytes,
            base_time.as_secs_f64() * 1e3,
        );
    }
}
