//! The fetched libpdfium.so binds and reads real documents as the corpus manifest says.
#![allow(clippy::unwrap_used)]

use renderpool_testkit::corpus;

#[test]
fn page_counts_match_the_manifest() {
    let _turn = crate::pdfium_turn();
    let manifest = corpus::manifest();
    let pdfium = render_pod::pdfium_lib::bind().unwrap();
    for name in ["pdf/R-intro.pdf", "pdf/multipage.pdf", "pdf/libtasn1.pdf"] {
        let expected = manifest[name]["pages"].as_i64().unwrap();
        let doc = pdfium.load_pdf_from_file(&corpus::path(name), None).unwrap();
        assert_eq!(i64::from(doc.pages().len()), expected, "{name}");
    }
}
