//! `GET /openapi.json`: the API's OpenAPI 3 description, kept beside the code
//! (`render-pod/openapi.json`), compiled in and answered from memory, never waiting for a slot.
//! The tests below hold it to the router's routes, the parsers' query parameters and the error
//! codes the code can produce.

use axum::http::header;
use axum::response::IntoResponse;

/// The document as checked in.
pub const DOCUMENT: &str = include_str!("../../openapi.json");

/// `GET /openapi.json`.
pub async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;
    use std::time::Duration;

    use serde_json::Value;

    use super::DOCUMENT;
    use crate::engine::JobError;
    use crate::http::digest::{CONTENT_DIGEST, REPR_DIGEST};
    use crate::http::input::{NDJSON, PASSWORD_HEADER, REQUEST_TIMEOUT_HEADER};
    use crate::http::params::{self, Query, ThumbnailLimits};
    use crate::http::source;
    use crate::http::{RouteKind, routes};
    use crate::office::detect::inflation::InflationError;
    use crate::office::{ConvertError, Refusal};
    use crate::ops::{OpError, size};
    use crate::quarantine::WorkClass;

    fn doc() -> Value {
        serde_json::from_str(DOCUMENT).expect("render-pod/openapi.json is not JSON")
    }

    /// The operation object of `method` on `path`.
    fn operation<'a>(doc: &'a Value, method: &str, path: &str) -> &'a Value {
        &doc["paths"][path][method.to_ascii_lowercase()]
    }

    /// Follows a local `$ref` (`#/components/...`), or returns the value itself.
    fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
        match value.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                let pointer = reference.strip_prefix('#').expect("only local references");
                resolve(
                    doc,
                    doc.pointer(pointer).unwrap_or_else(|| panic!("{reference} is missing")),
                )
            }
            None => value,
        }
    }

    /// The operation's parameters `in` (query, header), by lower-case name.
    fn parameters<'a>(doc: &'a Value, op: &'a Value, place: &str) -> BTreeMap<String, &'a Value> {
        op["parameters"]
            .as_array()
            .map(|params| params.iter().map(|p| resolve(doc, p)).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p["in"] == place)
            .map(|p| (p["name"].as_str().unwrap().to_ascii_lowercase(), p))
            .collect()
    }

    /// Every `$ref` anywhere under `value`.
    fn references<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::Object(map) => {
                for (key, v) in map {
                    match (key.as_str(), v) {
                        ("$ref", Value::String(r)) => out.push(r),
                        _ => references(v, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| references(v, out)),
            _ => {}
        }
    }

    #[test]
    fn the_document_is_valid_openapi_3_for_this_version() {
        // openapiv3 is the OpenAPI 3.0 object model: a field of the wrong type or shape, or a
        // missing required one, fails to parse.
        let parsed: openapiv3::OpenAPI = serde_json::from_str(DOCUMENT)
            .unwrap_or_else(|e| panic!("render-pod/openapi.json is not OpenAPI 3.0: {e}"));
        assert!(parsed.openapi.starts_with("3.0."), "openapi: {}", parsed.openapi);
        assert_eq!(parsed.info.version, env!("CARGO_PKG_VERSION"));
        let doc = doc();
        let mut refs = Vec::new();
        references(&doc, &mut refs);
        assert!(!refs.is_empty());
        for reference in refs {
            let pointer = reference.strip_prefix('#').unwrap_or_else(|| panic!("{reference}"));
            assert!(doc.pointer(pointer).is_some(), "{reference} points at nothing");
        }
    }

    #[test]
    fn the_paths_are_the_routers_routes() {
        let served: BTreeSet<(String, String)> = routes()
            .iter()
            .map(|route| (route.method.to_ascii_lowercase(), route.path.to_string()))
            .collect();
        let doc = doc();
        let described: BTreeSet<(String, String)> = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, item)| {
                let methods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
                methods
                    .into_iter()
                    .filter(|m| item.get(*m).is_some())
                    .map(|m| (m.to_string(), path.clone()))
            })
            .collect();
        assert_eq!(served, described, "routes served (left) against described (right)");
    }

    /// The names a document route's query parser asks for, or `None` for a route this test
    /// does not know yet.
    fn query_parsed_by(path: &str) -> Option<BTreeSet<&'static str>> {
        let query = Query::default();
        let caps = ThumbnailLimits { max_width: 1200, max_dpi: 150.0, max_pixels: 16_000_000 };
        // Results are beside the point: an empty query asks for every name (the watermark's
        // refusal of a missing text= comes after asking for it).
        match path {
            "/v1/info" => {}
            "/v1/extract" => drop(params::extract(&query, 500)),
            "/v1/render" => drop(params::render(&query)),
            "/v1/thumbnails" => drop(params::thumbnails(&query, 500, caps)),
            "/v1/watermark" => drop(params::watermark(&query)),
            "/v1/convert" => drop(params::convert(&query, 500)),
            _ => return None,
        }
        // Every document route reads its document from `source=` (in the version
        // `source_etag=` names) when given one.
        let mut asked = query.asked();
        asked.extend([source::PARAM, source::ETAG_PARAM]);
        Some(asked)
    }

    #[test]
    fn each_route_describes_the_query_parameters_its_parser_reads() {
        let doc = doc();
        for route in routes() {
            let op = operation(&doc, route.method, route.path);
            let described: BTreeSet<String> = parameters(&doc, op, "query").into_keys().collect();
            let parsed: BTreeSet<String> = match route.kind {
                RouteKind::Front | RouteKind::Jobs => BTreeSet::new(),
                RouteKind::Document => query_parsed_by(route.path)
                    .unwrap_or_else(|| panic!("add {} to query_parsed_by", route.path))
                    .into_iter()
                    .map(String::from)
                    .collect(),
            };
            assert_eq!(
                parsed, described,
                "{} {}: parsed (left), described (right)",
                route.method, route.path
            );
        }
    }

    #[test]
    fn headers_and_media_types_the_front_reads_are_described() {
        let doc = doc();
        for route in routes().iter().filter(|r| r.kind == RouteKind::Document) {
            let op = operation(&doc, route.method, route.path);
            let headers = parameters(&doc, op, "header");
            let context = format!("{} {}", route.method, route.path);
            assert!(headers.contains_key(REQUEST_TIMEOUT_HEADER), "{context}: Request-Timeout");
            // Every document route takes its document by digest too.
            for digest in [REPR_DIGEST, CONTENT_DIGEST] {
                assert!(headers.contains_key(digest), "{context}: {digest}");
            }
            // The password opens PDFs; a converted Office document has none.
            let pdf_routes = route.path != "/v1/convert";
            assert_eq!(
                headers.contains_key(PASSWORD_HEADER),
                pdf_routes,
                "{context}: X-Pdf-Password"
            );
            // Answers that carry an ETag are the ones If-None-Match can spare.
            let tagged =
                ["/v1/info", "/v1/extract", "/v1/render", "/v1/thumbnails"].contains(&route.path);
            assert_eq!(headers.contains_key("if-none-match"), tagged, "{context}: If-None-Match");
            let ok = resolve(&doc, &op["responses"]["200"]);
            assert_eq!(ok["headers"].get("ETag").is_some(), tagged, "{context}: ETag");
            assert_eq!(
                resolve(&doc, &op["responses"]["304"]).is_object(),
                tagged,
                "{context}: 304"
            );
            let unavailable = resolve(&doc, &op["responses"]["503"]);
            assert!(unavailable["headers"].get("Retry-After").is_some(), "{context}: Retry-After");
        }
        let strip = &operation(&doc, "POST", "/v1/thumbnails")["responses"]["200"];
        let strip = resolve(&doc, strip);
        assert!(strip["content"].get(NDJSON).is_some(), "the NDJSON filmstrip");
        assert!(strip["headers"].get("X-Page-Count").is_some());
        // OpenAPI describes Accept by the response's media types (an Accept parameter is
        // ignored by the spec); the description says how to ask.
        let description = operation(&doc, "POST", "/v1/thumbnails")["description"].as_str();
        assert!(description.unwrap().contains(&format!("Accept: {NDJSON}")));
    }

    #[test]
    fn parameter_defaults_and_bounds_are_the_codes() {
        let doc = doc();
        let param = |path: &str, name: &str| {
            let op = operation(&doc, "POST", path);
            let found = parameters(&doc, op, "query").get(name).copied().cloned();
            resolve(&doc, &found.unwrap_or_else(|| panic!("{path} {name}"))["schema"]).clone()
        };
        let dpi = param("/v1/render", "dpi");
        assert_eq!(dpi["default"].as_f64(), Some(f64::from(crate::ops::size::DEFAULT_DPI)));
        assert_eq!(dpi["minimum"].as_f64(), Some(f64::from(*size::DPI_RANGE.start())));
        assert_eq!(dpi["maximum"].as_f64(), Some(f64::from(*size::DPI_RANGE.end())));
        let width = param("/v1/render", "width");
        assert_eq!(width["minimum"].as_u64(), Some(u64::from(*size::WIDTH_RANGE.start())));
        assert_eq!(width["maximum"].as_u64(), Some(u64::from(*size::WIDTH_RANGE.end())));
        let strip_width = param("/v1/thumbnails", "width");
        assert_eq!(
            strip_width["default"].as_u64(),
            Some(u64::from(params::DEFAULT_THUMBNAIL_WIDTH))
        );
        for path in ["/v1/render", "/v1/thumbnails"] {
            let quality = param(path, "quality");
            assert_eq!(quality["minimum"].as_u64(), Some(u64::from(crate::ops::Quality::MIN)));
            assert_eq!(quality["maximum"].as_u64(), Some(u64::from(crate::ops::Quality::MAX)));
        }
        let text = param("/v1/watermark", "text");
        assert_eq!(text["maxLength"].as_u64(), Some(params::MAX_WATERMARK_CHARS as u64));
        let etag = param("/v1/render", source::ETAG_PARAM);
        assert_eq!(etag["maxLength"].as_u64(), Some(renderpool_api::jobs::MAX_ETAG as u64));
        let format = param("/v1/render", "format");
        let formats: Vec<&str> =
            format["enum"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        for format in &formats {
            assert!(format.parse::<crate::ops::ImageFormat>().is_ok(), "format={format}");
        }
        for format in ["png", "jpeg", "webp"] {
            assert!(formats.contains(&format), "format={format} is not described");
        }
        let pdfa = param("/v1/convert", "pdfa");
        for level in pdfa["enum"].as_array().unwrap() {
            assert!(level.as_str().unwrap().parse::<crate::office::PdfA>().is_ok(), "pdfa={level}");
        }
    }

    /// The error codes each status is described with: `components.schemas.ErrorNNN`.
    fn described_codes(doc: &Value) -> BTreeMap<u16, BTreeSet<String>> {
        doc["components"]["schemas"]
            .as_object()
            .unwrap()
            .iter()
            .filter_map(|(name, schema)| {
                let status = name.strip_prefix("Error")?.parse::<u16>().ok()?;
                let codes = schema["properties"]["error"]["properties"]["code"]["enum"]
                    .as_array()
                    .unwrap_or_else(|| panic!("{name} lists no codes"))
                    .iter()
                    .map(|c| c.as_str().unwrap().to_string())
                    .collect();
                Some((status, codes))
            })
            .collect()
    }

    /// The source of `rel` (under `render-pod/src`) without its unit tests.
    fn source(rel: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(rel);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        match text.find("#[cfg(test)]\nmod tests") {
            Some(at) => text[..at].to_string(),
            None => text,
        }
    }

    /// The string literals in `text`.
    fn literals(text: &str) -> Vec<&str> {
        text.split('"').skip(1).step_by(2).collect()
    }

    fn status_number(name: &str) -> u16 {
        match name {
            "BAD_REQUEST" => 400,
            "UNAUTHORIZED" => 401,
            "FORBIDDEN" => 403,
            "NOT_FOUND" => 404,
            "REQUEST_TIMEOUT" => 408,
            "PRECONDITION_FAILED" => 412,
            "PAYLOAD_TOO_LARGE" => 413,
            "UNSUPPORTED_MEDIA_TYPE" => 415,
            "UNPROCESSABLE_ENTITY" => 422,
            "INTERNAL_SERVER_ERROR" => 500,
            "BAD_GATEWAY" => 502,
            "SERVICE_UNAVAILABLE" => 503,
            "GATEWAY_TIMEOUT" => 504,
            other => panic!("add StatusCode::{other} to status_number"),
        }
    }

    /// Codes the HTTP layer makes itself: `StatusCode::NAME,` followed by the code literal
    /// (`ApiError::new(StatusCode::X, "code", ..)` or a struct literal's `code: "code"`).
    fn http_layer_codes() -> BTreeSet<(u16, String)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http");
        let mut found = BTreeSet::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if !name.ends_with(".rs") || name == "openapi.rs" {
                continue;
            }
            let text = source(&format!("http/{name}"));
            for (at, _) in text.match_indices("StatusCode::") {
                let rest = &text[at + "StatusCode::".len()..];
                let status: String =
                    rest.chars().take_while(|c| c.is_ascii_uppercase() || *c == '_').collect();
                let after = rest[status.len()..].trim_start();
                let Some(after) = after.strip_prefix(',') else { continue };
                let after = after.trim_start();
                let after = after.strip_prefix("code:").map_or(after, str::trim_start);
                let Some(code) = after.strip_prefix('"').and_then(|a| a.split('"').next()) else {
                    continue;
                };
                found.insert((status_number(&status), code.to_string()));
            }
        }
        found
    }

    /// The literals of every `fn code(&self)` in `rel`: the codes an error enum maps to.
    fn enum_codes(rel: &str) -> BTreeSet<String> {
        let text = source(rel);
        let start = text.find("pub fn code(&self)").unwrap_or_else(|| panic!("{rel}: no fn code"));
        let body = &text[start..];
        let body = &body[..body.find("\n    }\n").unwrap()];
        literals(body).into_iter().map(String::from).collect()
    }

    /// One of every error the engine, the operations and the Office path can answer with.
    fn every_error() -> Vec<(u16, &'static str)> {
        let ops = [
            OpError::Unreadable { detail: String::new() },
            OpError::PasswordRequired,
            OpError::WrongPassword,
            OpError::PageOutOfRange { page: 2, page_count: 1 },
            OpError::TooManyPixels { width: 1, height: 1, max_pixels: 0 },
            OpError::BitmapTooLarge { bytes: 1 },
            OpError::TooManyPages { requested: 2, max: 1 },
            OpError::InvalidRequest { detail: String::new() },
            OpError::Internal { detail: String::new() },
        ];
        let jobs = [
            JobError::QueueFull { slots: 1, depth: 1, retry_after_secs: 1 },
            JobError::WouldMissDeadline {
                expected_wait: Duration::ZERO,
                allowed: Duration::ZERO,
                retry_after_secs: 1,
            },
            JobError::Draining,
            JobError::DeadlineExceeded { deadline: Duration::ZERO, queued: true },
            JobError::WorkerCrashed { detail: String::new() },
            JobError::MemoryLimitExceeded { ceiling_bytes: 1 },
            JobError::Quarantined { remaining_secs: 1, work: WorkClass::Open },
            JobError::AnswerBudgetExhausted { bytes: 1, budget: 1, retry_after_secs: 1 },
            JobError::AnswersBacklogged { free: 0, budget: 1, retry_after_secs: 1 },
            JobError::AnswerTooLarge { bytes: 2, budget: 1 },
        ];
        let refusals = [
            Refusal::Epub,
            Refusal::OtherOpenDocument(String::new()),
            Refusal::OtherZip,
            Refusal::OtherOoxml,
            Refusal::OtherCompound,
            Refusal::Encrypted,
            Refusal::Damaged(String::new()),
            Refusal::MacroEnabled(""),
        ];
        let office = [
            ConvertError::NotConfigured,
            ConvertError::NotOffice(""),
            ConvertError::QueueFull { share: 1, waiting: 1, retry_after_secs: 1 },
            ConvertError::WaitTimeout { deadline_ms: 1, retry_after_secs: 1 },
            ConvertError::Busy { attempts: 1, retry_after_secs: 1 },
            ConvertError::Unavailable { detail: String::new(), retry_after_secs: 1 },
            ConvertError::Timeout { detail: String::new() },
            ConvertError::Unreadable { message: String::new() },
            ConvertError::PasswordRequired { message: String::new() },
            ConvertError::Failed { message: String::new() },
            ConvertError::Upstream { status: 418, message: String::new() },
            ConvertError::TooLarge { max: 1 },
            ConvertError::Inflation(InflationError::TooLarge { inflated: 2, max: 1 }),
            ConvertError::Inflation(InflationError::Bomb {
                part: String::new(),
                compressed: 1,
                inflated: 2,
                max: 1,
            }),
        ];
        let ops = ops.into_iter().map(|e| (e.status(), e.code()));
        let jobs = jobs.into_iter().map(|e| (e.status(), e.code()));
        let office = refusals
            .into_iter()
            .map(ConvertError::Refused)
            .chain(office)
            .map(|e| (e.status(), e.code()));
        ops.chain(jobs).chain(office).collect()
    }

    #[test]
    fn every_error_code_is_described_under_its_status_and_no_other() {
        let errors = every_error();
        let made: BTreeSet<&str> = errors.iter().map(|(_, code)| *code).collect();
        // The examples above cover every code the error enums map to (a new code in a
        // `fn code` fails here until it has an example, and so a status).
        for rel in ["engine/job.rs", "ops/error.rs", "office/error.rs"] {
            for code in enum_codes(rel) {
                assert!(
                    made.contains(code.as_str()),
                    "{rel} maps to {code:?}: add it to every_error"
                );
            }
        }
        let produced: BTreeSet<(u16, String)> = errors
            .into_iter()
            .map(|(status, code)| (status, code.to_string()))
            .chain(http_layer_codes())
            .collect();
        let doc = doc();
        let described = described_codes(&doc);
        for (status, code) in &produced {
            assert!(
                described.get(status).is_some_and(|codes| codes.contains(code)),
                "{status} {code} is not in components.schemas.Error{status}"
            );
        }
        for (status, codes) in &described {
            for code in codes {
                assert!(
                    produced.contains(&(*status, code.clone())),
                    "Error{status} lists {code}, which no code answers with that status"
                );
            }
        }
        // Every document route answers with each of those statuses.
        for route in routes().iter().filter(|r| r.kind == RouteKind::Document) {
            let responses = &operation(&doc, route.method, route.path)["responses"];
            for status in described.keys() {
                let response = resolve(&doc, &responses[status.to_string()]);
                let schema = resolve(&doc, &response["content"]["application/json"]["schema"]);
                assert_eq!(
                    schema,
                    &doc["components"]["schemas"][format!("Error{status}")],
                    "{} {} {status}",
                    route.method,
                    route.path
                );
            }
        }
    }
}
