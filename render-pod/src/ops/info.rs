//! `Info`: page count, per-page size and rotation, encryption, metadata.

use std::collections::BTreeMap;

use pdfium_render::prelude::{
    PdfDocument, PdfDocumentMetadataTagType, PdfPageRenderRotation, PdfSecurityHandlerRevision,
};

use super::{DocInfo, OpError, PageInfo};

/// Reads the facts about an open document.
pub fn document_info(doc: &PdfDocument) -> Result<DocInfo, OpError> {
    let pages = doc
        .pages()
        .iter()
        .map(|page| {
            let rotation = page.rotation().map_err(|e| OpError::pdfium("reading rotation", e))?;
            Ok(PageInfo {
                width_pt: page.width().value,
                height_pt: page.height().value,
                rotation_degrees: rotation_degrees(rotation),
            })
        })
        .collect::<Result<Vec<_>, OpError>>()?;
    let metadata = doc
        .metadata()
        .iter()
        .filter(|tag| !tag.value().trim().is_empty())
        .map(|tag| (tag_name(tag.tag_type()).to_string(), tag.value().to_string()))
        .collect::<BTreeMap<_, _>>();
    Ok(DocInfo {
        page_count: super::page_count(doc),
        pages,
        encrypted: is_encrypted(doc),
        metadata,
    })
}

/// PDFium answers -1 for no security handler; revisions it does not name (5 and 6, AES-256)
/// come back as an error, and those are encrypted too.
fn is_encrypted(doc: &PdfDocument) -> bool {
    !matches!(
        doc.permissions().security_handler_revision(),
        Ok(PdfSecurityHandlerRevision::Unprotected)
    )
}

fn rotation_degrees(rotation: PdfPageRenderRotation) -> u16 {
    match rotation {
        PdfPageRenderRotation::None => 0,
        PdfPageRenderRotation::Degrees90 => 90,
        PdfPageRenderRotation::Degrees180 => 180,
        PdfPageRenderRotation::Degrees270 => 270,
    }
}

fn tag_name(tag: PdfDocumentMetadataTagType) -> &'static str {
    match tag {
        PdfDocumentMetadataTagType::Title => "title",
        PdfDocumentMetadataTagType::Author => "author",
        PdfDocumentMetadataTagType::Subject => "subject",
        PdfDocumentMetadataTagType::Keywords => "keywords",
        PdfDocumentMetadataTagType::Creator => "creator",
        PdfDocumentMetadataTagType::Producer => "producer",
        PdfDocumentMetadataTagType::CreationDate => "creation_date",
        PdfDocumentMetadataTagType::ModificationDate => "modification_date",
    }
}
