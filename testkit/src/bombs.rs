//! Resource bombs built here, byte by byte: small PDFs that make PDFium take huge memory or
//! time, and a long but ordinary document. Each is a valid PDF with a correct xref table.
// Writing into a String or a Vec cannot fail: the unwraps below never fire.
#![allow(clippy::unwrap_used)]

use std::fmt::Write as _;

/// A PDF under construction: numbered objects, written with their xref table by [`Pdf::finish`].
#[derive(Default)]
pub struct Pdf {
    objects: Vec<Vec<u8>>,
}

impl Pdf {
    /// A number for an object whose body comes later (for forward references).
    pub fn reserve(&mut self) -> usize {
        self.objects.push(Vec::new());
        self.objects.len()
    }

    /// Sets the body of object `number`.
    pub fn set(&mut self, number: usize, body: impl Into<Vec<u8>>) {
        self.objects[number - 1] = body.into();
    }

    /// Adds an object; returns its number.
    pub fn add(&mut self, body: impl Into<Vec<u8>>) -> usize {
        let number = self.reserve();
        self.set(number, body);
        number
    }

    /// Adds a stream object with `dict` entries (without the `<< >>`) and `data`.
    pub fn stream(&mut self, dict: &str, data: &[u8]) -> usize {
        let number = self.reserve();
        self.set_stream(number, dict, data);
        number
    }

    /// Sets object `number` to a stream with `dict` entries and `data`.
    pub fn set_stream(&mut self, number: usize, dict: &str, data: &[u8]) {
        let mut body = format!("<< {dict} /Length {} >>\nstream\n", data.len()).into_bytes();
        body.extend_from_slice(data);
        body.extend_from_slice(b"\nendstream");
        self.set(number, body);
    }

    /// The file: header, objects, xref table and trailer naming `root` as the catalog.
    pub fn finish(self, root: usize) -> Vec<u8> {
        let mut out = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n".to_vec();
        let mut offsets = Vec::with_capacity(self.objects.len());
        for (i, body) in self.objects.iter().enumerate() {
            offsets.push(out.len());
            out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
            out.extend_from_slice(body);
            out.extend_from_slice(b"\nendobj\n");
        }
        let xref = out.len();
        let mut table = format!("xref\n0 {}\n0000000000 65535 f \n", self.objects.len() + 1);
        for offset in offsets {
            writeln!(table, "{offset:010} 00000 n ").unwrap();
        }
        write!(
            table,
            "trailer\n<< /Size {} /Root {root} 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            self.objects.len() + 1
        )
        .unwrap();
        out.extend_from_slice(table.as_bytes());
        out
    }
}

/// A one-page document (US Letter) drawing `content` (a stream with `filter` entries, or none)
/// with `resources`.
fn one_page(mut pdf: Pdf, resources: &str, filter: &str, content: &[u8]) -> Vec<u8> {
    let contents = pdf.stream(filter, content);
    let pages = pdf.reserve();
    let page = pdf.add(format!(
        "<< /Type /Page /Parent {pages} 0 R /MediaBox [0 0 612 792] /Resources {resources} \
         /Contents {contents} 0 R >>"
    ));
    pdf.set(pages, format!("<< /Type /Pages /Kids [{page} 0 R] /Count 1 >>"));
    let catalog = pdf.add(format!("<< /Type /Catalog /Pages {pages} 0 R >>"));
    pdf.finish(catalog)
}

/// Form XObjects that draw each other in a fan-out: form `i` draws form `i + 1` `fanout` times,
/// `depth` levels deep, the last one a filled square. A few KB that PDFium expands into
/// `fanout ^ depth` form instances, each parsed and held on its own.
pub fn xobject_fanout(depth: usize, fanout: usize) -> Vec<u8> {
    let mut pdf = Pdf::default();
    let forms: Vec<usize> = (0..=depth).map(|_| pdf.reserve()).collect();
    for level in 0..=depth {
        let (content, resources) = if level == depth {
            ("0 0 1 rg 0 0 10 10 re f".to_string(), "<< >>".to_string())
        } else {
            let mut content = String::new();
            for i in 0..fanout {
                write!(content, "q 0.5 0 0 0.5 {} {} cm /X Do Q ", i % 4 * 3, i / 4 * 3).unwrap();
            }
            (content, format!("<< /XObject << /X {} 0 R >> >>", forms[level + 1]))
        };
        let dict =
            format!("/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources {resources}");
        pdf.set_stream(forms[level], &dict, content.as_bytes());
    }
    one_page(pdf, &format!("<< /XObject << /X {} 0 R >> >>", forms[0]), "", b"/X Do")
}

/// One page of `count` tiny filled rectangles (millions of path operations), the content stream
/// deflated so the file stays a few MB.
pub fn path_storm(count: usize) -> Vec<u8> {
    let mut content = String::with_capacity(count * 16);
    for i in 0..count {
        writeln!(content, "{} {} 1 1 re f", i % 600, i / 600 % 780).unwrap();
    }
    one_page(Pdf::default(), "<< >>", "/Filter /FlateDecode", &zlib(content.as_bytes()))
}

/// One page with a `width` x `height` RGB inline image of zeros (`BI ... ID ... EI`) in its
/// deflated content stream: PDFium inflates an inline image whole while parsing, to find where
/// it ends.
pub fn huge_image(width: u64, height: u64) -> Vec<u8> {
    let mut content =
        format!("q 612 0 0 792 0 0 cm BI /W {width} /H {height} /BPC 8 /CS /RGB /F /Fl ID ")
            .into_bytes();
    content.extend(zeros_deflated(width * height * 3));
    content.extend_from_slice(b"\nEI Q");
    one_page(Pdf::default(), "<< >>", "/Filter /FlateDecode", &zlib(&content))
}

/// A document of `count` pages in a page tree of nodes of at most 100 kids. With `text`, page
/// N shows "Page N" (a content stream each); without, every page shares one empty stream.
pub fn many_pages(count: usize, text: bool) -> Vec<u8> {
    let mut pdf = Pdf::default();
    let font = pdf.add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>");
    let resources = format!("<< /Font << /F {font} 0 R >> >>");
    let shared = pdf.stream("", b"");
    let root = pdf.reserve();
    let mut leaves = Vec::with_capacity(count);
    let mut nodes = Vec::new();
    for chunk in 0..count.div_ceil(100) {
        let node = pdf.reserve();
        let first = chunk * 100;
        let kids: Vec<usize> = (first..count.min(first + 100))
            .map(|index| {
                let contents = if text {
                    let show = format!("BT /F 24 Tf 72 700 Td (Page {}) Tj ET", index + 1);
                    pdf.stream("", show.as_bytes())
                } else {
                    shared
                };
                pdf.add(format!(
                    "<< /Type /Page /Parent {node} 0 R /MediaBox [0 0 612 792] /Resources \
                     {resources} /Contents {contents} 0 R >>"
                ))
            })
            .collect();
        pdf.set(
            node,
            format!(
                "<< /Type /Pages /Parent {root} 0 R /Kids [{}] /Count {} >>",
                refs(&kids),
                kids.len()
            ),
        );
        leaves.extend(kids);
        nodes.push(node);
    }
    pdf.set(root, format!("<< /Type /Pages /Kids [{}] /Count {} >>", refs(&nodes), leaves.len()));
    let catalog = pdf.add(format!("<< /Type /Catalog /Pages {root} 0 R >>"));
    pdf.finish(catalog)
}

/// A large upload of ordinary work: one page with a filled square, and `pad` bytes of noise in
/// a stream object nothing refers to (PDFium never reads it, so the page renders in
/// milliseconds whatever the file's size).
pub fn padded_page(pad: usize) -> Vec<u8> {
    let mut pdf = Pdf::default();
    pdf.stream("", &noise(pad));
    one_page(pdf, "<< >>", "", b"0 0 1 rg 100 100 400 400 re f")
}

/// `count` pages that each show one shared image of noise, `width` x `rows` RGB pixels (stored
/// raw: the file holds `3 * width * rows` bytes of it), drawn in bands down the page. Rendered
/// `width` pixels wide, every pixel of the page is one of the image's and no band repeats
/// within a PNG's reach: a large answer of ordinary work from a small upload (about 3 bytes a
/// pixel; a 614 KB page rendered 1600 wide is a 13 MB PNG). A filmstrip of many such pages is a
/// long answer.
pub fn noise_pages(count: usize, width: u64, rows: u64) -> Vec<u8> {
    let mut pdf = Pdf::default();
    let pixels = usize::try_from(width * rows * 3).unwrap();
    let image = pdf.stream(
        &format!(
            "/Type /XObject /Subtype /Image /Width {width} /Height {rows} /BitsPerComponent 8 \
             /ColorSpace /DeviceRGB"
        ),
        &noise(pixels),
    );
    // Each band is as high on the page as the image is at the page's width.
    let band = 612.0 * rows as f64 / width as f64;
    let mut bands = String::new();
    let mut top = 792.0;
    while top > 0.0 {
        writeln!(bands, "q 612 0 0 {band:.4} 0 {:.4} cm /N Do Q", top - band).unwrap();
        top -= band;
    }
    let contents = pdf.stream("", bands.as_bytes());
    let pages = pdf.reserve();
    let kids: Vec<usize> = (0..count)
        .map(|_| {
            pdf.add(format!(
                "<< /Type /Page /Parent {pages} 0 R /MediaBox [0 0 612 792] /Resources \
                 << /XObject << /N {image} 0 R >> >> /Contents {contents} 0 R >>"
            ))
        })
        .collect();
    pdf.set(pages, format!("<< /Type /Pages /Kids [{}] /Count {count} >>", refs(&kids)));
    let catalog = pdf.add(format!("<< /Type /Catalog /Pages {pages} 0 R >>"));
    pdf.finish(catalog)
}

/// `len` bytes of xorshift noise, the same every time.
fn noise(len: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn refs(numbers: &[usize]) -> String {
    numbers.iter().map(|n| format!("{n} 0 R")).collect::<Vec<_>>().join(" ")
}

/// A zlib stream of `data`, compressed hard.
pub fn zlib(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

/// A zlib stream of `len` zero bytes, written by hand as one fixed-Huffman block: a literal 0,
/// then copies of 258 bytes from distance 1 (13 bits each), then the remaining literals.
pub fn zeros_deflated(len: u64) -> Vec<u8> {
    let mut bits = BitWriter::default();
    bits.push(1, 1); // BFINAL
    bits.push(0b01, 2); // fixed Huffman codes
    let literal_zero = |bits: &mut BitWriter| bits.push_code(0b0011_0000, 8);
    if len > 0 {
        literal_zero(&mut bits);
    }
    let rest = len.saturating_sub(1);
    for _ in 0..rest / 258 {
        bits.push_code(0b1100_0101, 8); // length code 285: 258 bytes
        bits.push_code(0, 5); // distance code 0: distance 1
    }
    for _ in 0..rest % 258 {
        literal_zero(&mut bits);
    }
    bits.push_code(0, 7); // end of block
    let mut out = vec![0x78, 0x01];
    out.extend(bits.finish());
    // Adler-32 of `len` zeros: s1 stays 1, s2 adds 1 per byte.
    let adler = ((len % 65521) << 16) | 1;
    out.extend_from_slice(&(adler as u32).to_be_bytes());
    out
}

/// Deflate's bit order: values least significant bit first, Huffman codes most significant first.
#[derive(Default)]
struct BitWriter {
    bytes: Vec<u8>,
    current: u32,
    filled: u32,
}

impl BitWriter {
    fn push(&mut self, value: u32, count: u32) {
        for i in 0..count {
            self.current |= ((value >> i) & 1) << self.filled;
            self.filled += 1;
            if self.filled == 8 {
                self.bytes.push(self.current as u8);
                self.current = 0;
                self.filled = 0;
            }
        }
    }

    fn push_code(&mut self, code: u32, count: u32) {
        let reversed = code.reverse_bits() >> (32 - count);
        self.push(reversed, count);
    }

    fn finish(mut self) -> Vec<u8> {
        if self.filled > 0 {
            self.bytes.push(self.current as u8);
        }
        self.bytes
    }
}
