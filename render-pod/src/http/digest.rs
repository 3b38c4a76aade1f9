//! Naming a document by its digest (RFC 9530): the `Repr-Digest` and `Content-Digest` headers a
//! client sends with a document it may not need to send, and the hashes of a body computed while
//! it arrives, checked against them. Each header is a structured-field dictionary (RFC 8941)
//! whose members are algorithms with byte-sequence values, e.g.
//! `Repr-Digest: sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:`; `sha-256` and
//! `blake3` (the pod's own hash) are read, any other algorithm is ignored, as RFC 9530 allows.

use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use sha2::{Digest as _, Sha256};

use super::error::ApiError;
use crate::doc_cache::Digest;
use crate::ops::DocHash;

/// The digest of the document (the representation), whether or not the body carries it.
pub const REPR_DIGEST: &str = "repr-digest";
/// The digest of the body as sent; for a document sent as it is, the same digest.
pub const CONTENT_DIGEST: &str = "content-digest";

/// The pod's own hash in a digest header (no registered name: BLAKE3 is not in IANA's list).
pub const BLAKE3: &str = "blake3";
/// SHA-256 in a digest header.
pub const SHA_256: &str = "sha-256";

/// Byte sequences decoded with or without their padding (RFC 8941 asks parsers to be lenient).
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The digests the request names its document by, from both headers (every value of each);
/// empty when it names none this pod reads. A header that does not parse is refused.
pub fn requested(headers: &HeaderMap) -> Result<Vec<Digest>, ApiError> {
    let mut digests = Vec::new();
    for name in [REPR_DIGEST, CONTENT_DIGEST] {
        for value in headers.get_all(name) {
            let text = value
                .to_str()
                .map_err(|_| invalid(name, "the value is not visible ASCII".to_string()))?;
            dictionary(text, &mut digests).map_err(|why| invalid(name, why))?;
        }
    }
    let mut unique = Vec::with_capacity(digests.len());
    for digest in digests {
        if !unique.contains(&digest) {
            unique.push(digest);
        }
    }
    Ok(unique)
}

fn invalid(name: &str, why: String) -> ApiError {
    ApiError::invalid(format!(
        "{name}: {why} (expected e.g. {name}: {SHA_256}=:<base64 of the SHA-256 of the document>:)"
    ))
}

/// `digest` as a `Repr-Digest` value naming it alone.
pub fn header_value(digest: &Digest) -> String {
    match digest {
        Digest::Sha256(sha256) => format!("{SHA_256}=:{}:", BASE64.encode(sha256)),
        Digest::Blake3(hash) => format!("{BLAKE3}=:{}:", BASE64.encode(hash.0)),
    }
}

/// Whether any of `digests` is SHA-256 (only then is the body hashed with it too).
pub fn wants_sha256(digests: &[Digest]) -> bool {
    digests.iter().any(|d| matches!(d, Digest::Sha256(_)))
}

/// Reads a dictionary's `sha-256` and `blake3` members into `out`.
fn dictionary(text: &str, out: &mut Vec<Digest>) -> Result<(), String> {
    let mut rest = text.trim_matches([' ', '\t']);
    while !rest.is_empty() {
        let (key, after) = key(rest)?;
        let (value, after) = match after.strip_prefix('=') {
            Some(after) => item(after)?,
            None => (Item::Other, after), // a bare key is boolean true
        };
        rest = parameters(after)?;
        match key {
            SHA_256 | BLAKE3 => {
                let Item::Bytes(bytes) = value else {
                    return Err(format!("{key} must be a byte sequence (:base64:)"));
                };
                let bytes: [u8; 32] = bytes
                    .try_into()
                    .map_err(|b: Vec<u8>| format!("{key} has {} bytes, not 32", b.len()))?;
                out.push(if key == SHA_256 {
                    Digest::Sha256(bytes)
                } else {
                    Digest::Blake3(DocHash(bytes))
                });
            }
            _ => {}
        }
        rest = rest.trim_start_matches([' ', '\t']);
        if rest.is_empty() {
            break;
        }
        rest = rest.strip_prefix(',').ok_or("members must be separated by commas")?;
        rest = rest.trim_start_matches([' ', '\t']);
        if rest.is_empty() {
            return Err("a trailing comma".into());
        }
    }
    Ok(())
}

/// A dictionary key (`lcalpha / "*"` then `lcalpha / DIGIT / "_" / "-" / "." / "*"`) and
/// what follows it.
fn key(text: &str) -> Result<(&str, &str), String> {
    let first = text.chars().next().ok_or("a key is missing")?;
    if !(first.is_ascii_lowercase() || first == '*') {
        return Err(format!("a key cannot start with {first:?}"));
    }
    let end = text
        .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "_-.*".contains(c)))
        .unwrap_or(text.len());
    Ok(text.split_at(end))
}

/// A member's value: a byte sequence is kept, anything else only skipped.
enum Item {
    Bytes(Vec<u8>),
    Other,
}

/// A bare item (RFC 8941 section 3.3) and what follows it.
fn item(text: &str) -> Result<(Item, &str), String> {
    if let Some(after) = text.strip_prefix(':') {
        let end = after.find(':').ok_or("a byte sequence is not closed with ':'")?;
        let bytes = BASE64
            .decode(&after[..end])
            .map_err(|e| format!("a byte sequence is not base64: {e}"))?;
        return Ok((Item::Bytes(bytes), &after[end + 1..]));
    }
    if let Some(after) = text.strip_prefix('"') {
        let mut escaped = false;
        for (at, c) in after.char_indices() {
            match (escaped, c) {
                (true, '"' | '\\') => escaped = false,
                (true, _) => return Err("a string escapes something other than \" or \\".into()),
                (false, '\\') => escaped = true,
                (false, '"') => return Ok((Item::Other, &after[at + 1..])),
                (false, c) if !(' '..='~').contains(&c) => {
                    return Err("a string holds a character outside visible ASCII".into());
                }
                _ => {}
            }
        }
        return Err("a string is not closed".into());
    }
    // A token, number, decimal or boolean: up to the next delimiter.
    let end = text.find([';', ',', ' ', '\t']).unwrap_or(text.len());
    if end == 0 {
        return Err("a value is missing after '='".into());
    }
    Ok((Item::Other, &text[end..]))
}

/// Skips a member's parameters (`;key[=item]`) and returns what follows them.
fn parameters(mut text: &str) -> Result<&str, String> {
    while let Some(after) = text.strip_prefix(';') {
        let (_, after) = key(after.trim_start_matches(' '))?;
        text = match after.strip_prefix('=') {
            Some(value) => item(value)?.1,
            None => after,
        };
    }
    Ok(text)
}

/// A body's hashes, computed piece by piece as it arrives: BLAKE3 always (the pod's key for a
/// document), SHA-256 when the client named the document by it.
pub struct Hashing {
    blake3: blake3::Hasher,
    sha256: Option<Sha256>,
}

/// What [`Hashing`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hashed {
    /// BLAKE3.
    pub hash: DocHash,
    /// SHA-256, when it was asked for.
    pub sha256: Option<[u8; 32]>,
}

impl Hashing {
    /// Hashing with BLAKE3, and SHA-256 too when `sha256`.
    pub fn new(sha256: bool) -> Self {
        Self { blake3: blake3::Hasher::new(), sha256: sha256.then(Sha256::new) }
    }

    /// Hashes the next piece.
    pub fn update(&mut self, piece: &[u8]) {
        self.blake3.update(piece);
        if let Some(sha256) = &mut self.sha256 {
            sha256.update(piece);
        }
    }

    /// The hashes of everything given.
    pub fn finish(self) -> Hashed {
        Hashed {
            hash: DocHash(*self.blake3.finalize().as_bytes()),
            sha256: self.sha256.map(|sha256| sha256.finalize().into()),
        }
    }
}

/// 400 `digest_mismatch` unless every digest the client declared is the body's.
pub fn check(declared: &[Digest], hashed: &Hashed) -> Result<(), ApiError> {
    for digest in declared {
        let (name, matches) = match digest {
            Digest::Blake3(hash) => (BLAKE3, *hash == hashed.hash),
            Digest::Sha256(sha256) => (SHA_256, hashed.sha256 == Some(*sha256)),
        };
        if !matches {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "digest_mismatch",
                format!(
                    "the document's {name} digest is not the one the request declared: it was not \
                     used or kept; send the digest of the document itself"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use axum::http::HeaderValue;
    use base64::engine::general_purpose;

    use super::*;

    fn parse(value: &str) -> Result<Vec<Digest>, String> {
        let mut out = Vec::new();
        dictionary(value, &mut out).map(|()| out)
    }

    fn sha256_of(bytes: &[u8]) -> [u8; 32] {
        Sha256::digest(bytes).into()
    }

    #[test]
    fn the_rfc_examples_parse() {
        // RFC 9530 section 2, the digest of {"hello": "world"}.
        let expected = sha256_of(b"{\"hello\": \"world\"}");
        assert_eq!(
            parse("sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:").unwrap(),
            vec![Digest::Sha256(expected)]
        );
        // Several algorithms, unknown ones and their parameters skipped, whitespace around.
        let blake3 = DocHash::of(b"doc");
        let value = format!(
            " sha-512=:{}:;x=1 , unixsum=30637,blake3=:{}:, id-sha-256=\"a,b\";q ",
            BASE64.encode([1u8; 64]),
            BASE64.encode(blake3.0)
        );
        assert_eq!(parse(&value).unwrap(), vec![Digest::Blake3(blake3)]);
        // Padding is optional.
        let unpadded = general_purpose::STANDARD_NO_PAD.encode(expected);
        assert_eq!(
            parse(&format!("sha-256=:{unpadded}:")).unwrap(),
            vec![Digest::Sha256(expected)]
        );
        assert_eq!(parse("").unwrap(), vec![]);
    }

    #[test]
    fn malformed_digests_are_refused() {
        for bad in [
            "sha-256=:AAAA:",                                        // 3 bytes
            "sha-256=X48E9q",                                        // a token, not bytes
            "sha-256",                                               // boolean
            "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=", // not closed
            "sha-256=:!!!!:",                                        // not base64
            "Sha-256=:AAAA:",                                        // keys are lower case
            "a=1,,b=2",
            "a=1,",
            "a=\"open",
            "a=",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn both_headers_are_read_and_bad_ones_refused() {
        let mut headers = HeaderMap::new();
        assert_eq!(requested(&headers).unwrap(), vec![]);
        let sha256 = sha256_of(b"doc");
        let value = format!("sha-256=:{}:", BASE64.encode(sha256));
        headers.insert(REPR_DIGEST, HeaderValue::from_str(&value).unwrap());
        headers.insert(CONTENT_DIGEST, HeaderValue::from_str(&value).unwrap());
        assert_eq!(requested(&headers).unwrap(), vec![Digest::Sha256(sha256)], "once, not twice");
        headers.insert(CONTENT_DIGEST, HeaderValue::from_static("sha-256=:AAAA:"));
        let refused = requested(&headers).unwrap_err();
        assert_eq!(refused.code, "invalid_request");
        assert!(refused.message.starts_with("content-digest: "), "{}", refused.message);
    }

    #[test]
    fn hashes_in_pieces_match_hashes_at_once_and_are_checked() {
        let body: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let mut hashing = Hashing::new(true);
        for piece in body.chunks(777) {
            hashing.update(piece);
        }
        let hashed = hashing.finish();
        assert_eq!(hashed, Hashed { hash: DocHash::of(&body), sha256: Some(sha256_of(&body)) });
        assert!(
            check(&[Digest::Sha256(sha256_of(&body)), Digest::Blake3(hashed.hash)], &hashed)
                .is_ok()
        );
        let wrong = check(&[Digest::Sha256(sha256_of(b"other"))], &hashed).unwrap_err();
        assert_eq!((wrong.status.as_u16(), wrong.code), (400, "digest_mismatch"));
        assert!(check(&[Digest::Blake3(DocHash::of(b"other"))], &hashed).is_err());
        // Without SHA-256 computed, a declared one cannot match.
        let blake3_only = Hashing::new(false).finish();
        assert_eq!(blake3_only.sha256, None);
        assert!(check(&[Digest::Sha256(sha256_of(b""))], &blake3_only).is_err());
    }
}
