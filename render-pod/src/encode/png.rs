//! PNG of a rendered page in one pass over its rows: each BGRA row is converted (grey or RGB),
//! filtered against the row above and fed to fdeflate (a deflate tuned for filtered PNG rows,
//! what the `png` crate's fast mode uses). Only three rows are held, so the work stays in cache
//! and the render is read once (a colour page: once more up to its first colour row).

use fdeflate::Compressor;

use super::pixels::{self, BGRA};
use super::png_filter::Filter;
use super::{EncodeError, ImageFormat, Pixels};

/// Row filters of the grey and the colour encode.
#[derive(Debug, Clone, Copy)]
pub struct PngFilters {
    /// For pages without colour.
    pub grey: Filter,
    /// For pages with colour.
    pub colour: Filter,
}

/// Chosen with `benches/encoding.rs`: on grey pages Up is as fast as Sub and smaller, Paeth a
/// little smaller but slower; on colour pages only Paeth keeps RGB no larger than the default
/// RGBA encode (Up and Sub are faster but larger).
pub const FILTERS: PngFilters = PngFilters { grey: Filter::Up, colour: Filter::Paeth };

/// The most data bytes of one chunk (the format's limit): one IDAT for any real page, as the
/// `png` crate writes.
const IDAT_MAX: usize = i32::MAX as usize;

/// Encodes an opaque BGRA render (rows packed) as an 8-bit PNG: grey when every pixel is
/// neutral (R = G = B), else RGB; alpha is dropped.
pub fn encode_bgra(
    bgra: &[u8],
    width: u32,
    height: u32,
    filters: PngFilters,
) -> Result<Vec<u8>, EncodeError> {
    Pixels::Bgra(bgra).checked(width, height)?;
    let max = ImageFormat::Png.max_dimension();
    if width > max || height > max {
        return Err(EncodeError::TooLarge { format: ImageFormat::Png, max });
    }
    if width == 0 || height == 0 {
        return Err(EncodeError::Png(format!("a {width}x{height} image has no pixels")));
    }
    // Optimistically grey: most pages are text, and a colour page usually shows colour in its
    // first rows, so little grey work is thrown away. A read-only colour test first would read
    // every grey page twice (measured a third slower on them).
    let step = step_for_this_cpu();
    let grey = Rows { layout: Layout::Grey, filter: filters.grey, idat_max: IDAT_MAX };
    if let Some(png) = grey.encode(bgra, width, height, step)? {
        return Ok(png);
    }
    let colour = Rows { layout: Layout::Rgb, filter: filters.colour, idat_max: IDAT_MAX };
    colour
        .encode(bgra, width, height, step)?
        .ok_or_else(|| EncodeError::Png("RGB conversion refused a row".to_owned()))
}

/// The layout of the rows in the PNG.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// One byte per pixel, from the red channel of neutral pixels.
    Grey,
    /// Three bytes per pixel.
    Rgb,
}

impl Layout {
    fn bytes_per_pixel(self) -> usize {
        match self {
            Layout::Grey => 1,
            Layout::Rgb => 3,
        }
    }

    /// The IHDR colour type.
    fn colour_type(self) -> u8 {
        match self {
            Layout::Grey => 0,
            Layout::Rgb => 2,
        }
    }
}

/// One way of writing the rows: layout, filter and IDAT chunk size.
#[derive(Debug, Clone, Copy)]
struct Rows {
    layout: Layout,
    filter: Filter,
    idat_max: usize,
}

/// Converts a BGRA row into `row` and filters it against `prev` into `out`; `false` when the
/// row does not fit the layout.
type Step = fn(Rows, &[u8], &[u8], &mut [u8], &mut [u8]) -> bool;

impl Rows {
    /// The PNG, or `None` when a row does not fit the layout. `bgra` holds `width` x `height`
    /// pixels, both at least 1; `step` is `Rows::step` or a build of it for this CPU.
    fn encode(
        self,
        bgra: &[u8],
        width: u32,
        height: u32,
        step: Step,
    ) -> Result<Option<Vec<u8>>, EncodeError> {
        let row_len = width as usize * self.layout.bytes_per_pixel();
        let mut out = Vec::with_capacity(bgra.len() / 8);
        out.extend_from_slice(b"\x89PNG\r\n\x1a\n");
        let mut header = [0u8; 13];
        header[..4].copy_from_slice(&width.to_be_bytes());
        header[4..8].copy_from_slice(&height.to_be_bytes());
        // Bit depth 8, colour type; compression, filter method and interlace all 0.
        header[8] = 8;
        header[9] = self.layout.colour_type();
        write_chunk(&mut out, b"IHDR", &header);

        // The zlib stream goes straight after an IDAT header whose length is patched at the
        // end: fdeflate writes 8 bytes at a time, and a writer that cuts chunks as it goes
        // made each of those writes dearer (measured 20% slower over the whole encode).
        let idat = out.len();
        out.extend_from_slice(&[0, 0, 0, 0]);
        out.extend_from_slice(b"IDAT");
        let mut zlib = Compressor::new(out).map_err(io_error)?;
        let mut prev = vec![0u8; row_len];
        let mut row = vec![0u8; row_len];
        let mut filtered = vec![0u8; row_len + 1];
        for bgra_row in bgra.chunks_exact(width as usize * BGRA) {
            if !step(self, bgra_row, &prev, &mut row, &mut filtered) {
                return Ok(None);
            }
            zlib.write_data(&filtered).map_err(io_error)?;
            std::mem::swap(&mut prev, &mut row);
        }
        let out = zlib.finish().map_err(io_error)?;
        let mut out = close_idat(out, idat, self.idat_max);
        write_chunk(&mut out, b"IEND", &[]);
        Ok(Some(out))
    }

    /// One row of `encode`; always inlined, so `step_avx2` compiles it for AVX2.
    #[inline(always)]
    fn step(self, bgra: &[u8], prev: &[u8], row: &mut [u8], out: &mut [u8]) -> bool {
        let fits = match self.layout {
            Layout::Grey => pixels::bgra_to_gray_if_neutral(bgra, row),
            Layout::Rgb => {
                pixels::bgra_to_rgb(bgra, row);
                true
            }
        };
        // A row equal to the one above filters to zeros with Up, the cheapest filter and the
        // best such a row can get: blank margins skip Paeth's arithmetic.
        let filter =
            if self.filter != Filter::Up && row == prev { Filter::Up } else { self.filter };
        filter.apply(prev, row, self.layout.bytes_per_pixel(), out);
        fits
    }
}

/// `Rows::step` compiled for AVX2 when the CPU has it: the conversions and filters then
/// vectorise twice as wide (measured 15 to 20% less time on grey and colour pages alike).
fn step_for_this_cpu() -> Step {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: step_avx2 only needs AVX2, which the CPU was just found to have.
        return |rows, bgra, prev, row, out| unsafe { step_avx2(rows, bgra, prev, row, out) };
    }
    Rows::step
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn step_avx2(rows: Rows, bgra: &[u8], prev: &[u8], row: &mut [u8], out: &mut [u8]) -> bool {
    rows.step(bgra, prev, row, out)
}

/// Appends a chunk: length, type, data, CRC of type and data.
fn write_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&chunk_len(data.len()).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc(&out[out.len() - data.len() - 4..]).to_be_bytes());
}

/// Completes the IDAT chunk opened at `out[start..]`, whose length field is a placeholder and
/// whose data runs to the end; a stream longer than `max` is cut into several chunks.
fn close_idat(mut out: Vec<u8>, start: usize, max: usize) -> Vec<u8> {
    let len = out.len() - start - 8;
    if len <= max {
        out[start..start + 4].copy_from_slice(&chunk_len(len).to_be_bytes());
        let crc = crc(&out[start + 4..]);
        out.extend_from_slice(&crc.to_be_bytes());
        return out;
    }
    let zlib = out.split_off(start + 8);
    out.truncate(start);
    for piece in zlib.chunks(max) {
        write_chunk(&mut out, b"IDAT", piece);
    }
    out
}

/// CRC-32 of a chunk's type and data.
fn crc(kind_and_data: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(kind_and_data);
    hasher.finalize()
}

/// Chunk lengths are at most `IDAT_MAX`, the format's 2^31 - 1, so they fit the field.
fn chunk_len(len: usize) -> u32 {
    debug_assert!(len <= IDAT_MAX);
    len as u32
}

fn io_error(e: std::io::Error) -> EncodeError {
    EncodeError::Png(e.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::io::Cursor;

    use super::*;

    const ALL: [Filter; 5] =
        [Filter::None, Filter::Sub, Filter::Up, Filter::Average, Filter::Paeth];

    /// Decodes with the `png` crate: colour type and pixels.
    fn decode(png: &[u8]) -> (png::ColorType, Vec<u8>) {
        let mut reader = png::Decoder::new(Cursor::new(png)).read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        assert_eq!(info.bit_depth, png::BitDepth::Eight);
        pixels.truncate(info.buffer_size());
        (info.color_type, pixels)
    }

    /// Encodes with `filters`, decodes, and checks the colour type and every pixel.
    fn round_trip(bgra: &[u8], width: u32, height: u32, filters: PngFilters) {
        let png = encode_bgra(bgra, width, height, filters).unwrap();
        check(&png, bgra, width, height);
    }

    fn check(png: &[u8], bgra: &[u8], width: u32, height: u32) {
        let (colour, pixels) = decode(png);
        let (info_w, info_h) = dimensions(png);
        assert_eq!((info_w, info_h), (width, height));
        if pixels::gray_if_neutral(bgra).is_some() {
            assert_eq!(colour, png::ColorType::Grayscale);
            let grey: Vec<u8> = bgra.chunks_exact(4).map(|p| p[0]).collect();
            assert_eq!(pixels, grey);
        } else {
            assert_eq!(colour, png::ColorType::Rgb);
            let rgb: Vec<u8> = bgra.chunks_exact(4).flat_map(|p| [p[2], p[1], p[0]]).collect();
            assert_eq!(pixels, rgb);
        }
    }

    fn dimensions(png: &[u8]) -> (u32, u32) {
        let reader = png::Decoder::new(Cursor::new(png)).read_info().unwrap();
        (reader.info().width, reader.info().height)
    }

    /// xorshift64: deterministic noise without a crate.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            (self.next() >> 16) % n
        }
    }

    /// A page-like image: white, with dark and antialiased strokes, grey or in colour.
    fn page(width: u32, height: u32, colour: bool) -> Vec<u8> {
        let mut bgra = vec![255u8; width as usize * height as usize * 4];
        for (i, p) in bgra.chunks_exact_mut(4).enumerate() {
            let (x, y) = (i as u32 % width, i as u32 / width);
            if (x / 3 + y / 5) % 7 == 0 {
                let v = ((x * 37 + y * 11) % 256) as u8;
                let (g, b) = if colour { (v / 2, 255 - v) } else { (v, v) };
                p.copy_from_slice(&[v, g, b, 255]);
            }
        }
        bgra
    }

    #[test]
    fn grey_and_colour_pages_round_trip_with_every_filter() {
        for filter in ALL {
            let filters = PngFilters { grey: filter, colour: filter };
            for (w, h) in [(1, 1), (1, 17), (17, 1), (2, 2), (3, 5), (101, 37), (640, 90)] {
                round_trip(&page(w, h, false), w, h, filters);
                round_trip(&page(w, h, true), w, h, filters);
            }
        }
    }

    #[test]
    fn single_pixels_round_trip() {
        for filter in ALL {
            let filters = PngFilters { grey: filter, colour: filter };
            for bgra in [[0, 0, 0, 255], [255, 255, 255, 255], [7, 7, 7, 0], [1, 2, 3, 255]] {
                round_trip(&bgra, 1, 1, filters);
            }
        }
    }

    #[test]
    fn random_images_round_trip() {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        for i in 0..300 {
            let (w, h) = (1 + rng.below(48) as u32, 1 + rng.below(48) as u32);
            let n = w as usize * h as usize;
            let mut bgra = Vec::with_capacity(n * 4);
            // Noise, grey noise, and sparse changes on a flat background (long zero runs).
            let kind = i % 3;
            let mut last = [255u8; 3];
            for _ in 0..n {
                let v = rng.next().to_le_bytes();
                let rgb = match kind {
                    0 => [v[0], v[1], v[2]],
                    1 => [v[0]; 3],
                    _ if v[3] < 16 => [v[0], v[1], v[2]],
                    _ => last,
                };
                last = rgb;
                bgra.extend_from_slice(&[rgb[0], rgb[1], rgb[2], 255]);
            }
            let filters = PngFilters { grey: ALL[i % 5], colour: ALL[(i / 5) % 5] };
            round_trip(&bgra, w, h, filters);
        }
    }

    #[test]
    fn colour_type_follows_the_page() {
        let grey = encode_bgra(&page(50, 20, false), 50, 20, FILTERS).unwrap();
        assert_eq!(decode(&grey).0, png::ColorType::Grayscale);
        // Colour only in the last pixel: the grey attempt is abandoned there.
        let mut late = page(50, 20, false);
        let last = late.len() - 4;
        late[last..].copy_from_slice(&[10, 20, 30, 255]);
        let png = encode_bgra(&late, 50, 20, FILTERS).unwrap();
        assert_eq!(decode(&png).0, png::ColorType::Rgb);
        check(&png, &late, 50, 20);
    }

    #[test]
    fn idat_chunks_are_split_and_checksummed() {
        let (w, h) = (97, 61);
        let bgra = page(w, h, true);
        for idat_max in [1, 7, 64, 4096, 1 << 20, IDAT_MAX] {
            let rows = Rows { layout: Layout::Rgb, filter: Filter::Paeth, idat_max };
            let png = rows.encode(&bgra, w, h, step_for_this_cpu()).unwrap().unwrap();
            check(&png, &bgra, w, h);
            // Walk the chunks: every one within bounds, with a correct CRC, IEND last.
            let mut at = 8;
            let mut kinds = Vec::new();
            while at < png.len() {
                let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
                let body = &png[at + 4..at + 8 + len];
                let stored =
                    u32::from_be_bytes(png[at + 8 + len..at + 12 + len].try_into().unwrap());
                assert_eq!(stored, crc(body));
                if &body[..4] == b"IDAT" {
                    assert!(0 < len && len <= idat_max);
                }
                kinds.push(body[..4].to_vec());
                at += 12 + len;
            }
            assert_eq!(at, png.len());
            assert_eq!(kinds.first().unwrap(), b"IHDR");
            assert_eq!(kinds.last().unwrap(), b"IEND");
        }
    }

    #[test]
    fn the_cpu_specific_step_writes_the_same_bytes() {
        // On a CPU with AVX2 this compares the two builds of `Rows::step`; elsewhere, itself.
        let mut rng = Rng(0x5DEE_CE66_D1CE_4E5B);
        for i in 0..60 {
            let (w, h) = (1 + rng.below(90) as u32, 1 + rng.below(20) as u32);
            let bgra: Vec<u8> = if i % 2 == 0 {
                page(w, h, i % 4 == 0)
            } else {
                (0..w * h * 4).map(|_| rng.next() as u8).collect()
            };
            for filter in ALL {
                for layout in [Layout::Grey, Layout::Rgb] {
                    let rows = Rows { layout, filter, idat_max: IDAT_MAX };
                    let portable = rows.encode(&bgra, w, h, Rows::step).unwrap();
                    let this_cpu = rows.encode(&bgra, w, h, step_for_this_cpu()).unwrap();
                    assert_eq!(portable, this_cpu, "{w}x{h} {filter:?} {layout:?}");
                }
            }
        }
    }

    #[test]
    fn bad_sizes_are_refused() {
        let err = encode_bgra(&[0; 12], 2, 2, FILTERS).unwrap_err();
        assert_eq!(
            err,
            EncodeError::BadBuffer { width: 2, height: 2, bytes_per_pixel: 4, len: 12 }
        );
        assert!(matches!(encode_bgra(&[], 0, 5, FILTERS), Err(EncodeError::Png(_))));
        assert!(matches!(encode_bgra(&[], 5, 0, FILTERS), Err(EncodeError::Png(_))));
    }
}
