//! Why an Office document was not converted, with the API code and status a client acts on.

use super::detect::Refusal;
use super::detect::inflation::InflationError;

/// A failed or refused conversion.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// No Gotenberg URL is configured on this pod.
    #[error(
        "Office conversion is not configured on this pod (no --gotenberg-url / RENDERPOD_GOTENBERG_URL); PDFs are still served"
    )]
    NotConfigured,
    /// The bytes are not a document Gotenberg is asked to convert.
    #[error("{0}")]
    Refused(Refusal),
    /// The document is not an Office document at all (for `/v1/convert`).
    #[error("{0}")]
    NotOffice(&'static str),
    /// The package declares it inflates past a limit, or like a ZIP bomb (from its central
    /// directory, before Gotenberg sees it).
    #[error("{0}")]
    Inflation(InflationError),
    /// Every place is taken and the line of waiters is full.
    #[error("all {share} Office conversion places are taken and {waiting} requests are waiting")]
    QueueFull { share: u32, waiting: usize, retry_after_secs: u64 },
    /// No place freed up before the job deadline.
    #[error("no Office conversion place freed up within the job deadline of {deadline_ms} ms")]
    WaitTimeout { deadline_ms: u64, retry_after_secs: u64 },
    /// Gotenberg kept answering busy (429) until the deadline was near.
    #[error("every Gotenberg replica tried was busy ({attempts} attempts)")]
    Busy { attempts: u32, retry_after_secs: u64 },
    /// Gotenberg cannot be reached, or closed the connection mid-conversion.
    #[error("Gotenberg is unavailable: {detail}")]
    Unavailable { detail: String, retry_after_secs: u64 },
    /// The conversion ran past the job deadline, or past Gotenberg's own time limit.
    #[error("the conversion did not finish in time: {detail}")]
    Timeout { detail: String },
    /// LibreOffice could not read the document (Gotenberg answered 400).
    #[error("LibreOffice could not read the document: {message}")]
    Unreadable { message: String },
    /// The document needs a password.
    #[error("the Office document is password-protected: {message}")]
    PasswordRequired { message: String },
    /// LibreOffice failed on a document it read (Gotenberg answered 500).
    #[error("LibreOffice failed to convert the document: {message}")]
    Failed { message: String },
    /// Gotenberg answered something this client does not expect.
    #[error("Gotenberg answered {status}: {message}")]
    Upstream { status: u16, message: String },
    /// The PDF is larger than this pod accepts.
    #[error("the converted PDF exceeds the limit of {max} bytes")]
    TooLarge { max: u64 },
}

impl ConvertError {
    /// The stable machine-readable code for the API's error body.
    pub fn code(&self) -> &'static str {
        match self {
            ConvertError::NotConfigured => "office_not_configured",
            ConvertError::Refused(r) => match r {
                Refusal::Encrypted => "encrypted_document",
                Refusal::Damaged(_) => "unreadable_document",
                Refusal::MacroEnabled(_) => "macro_enabled_document",
                _ => "unsupported_format",
            },
            ConvertError::Inflation(e) => match e {
                InflationError::Bomb { .. } => "office_inflate_bomb",
                InflationError::Damaged(_) => "unreadable_document",
                InflationError::TooLarge { .. } | InflationError::PartTooLarge { .. } => {
                    "office_inflated_too_large"
                }
            },
            ConvertError::NotOffice(_) => "unsupported_format",
            ConvertError::QueueFull { .. }
            | ConvertError::WaitTimeout { .. }
            | ConvertError::Busy { .. } => "office_busy",
            ConvertError::Unavailable { .. } => "office_unavailable",
            ConvertError::Timeout { .. } => "conversion_timeout",
            ConvertError::Unreadable { .. } => "unreadable_document",
            ConvertError::PasswordRequired { .. } => "password_required",
            ConvertError::Failed { .. } => "conversion_failed",
            ConvertError::Upstream { .. } => "office_error",
            ConvertError::TooLarge { .. } => "pdf_too_large",
        }
    }

    /// The HTTP status that fits.
    pub fn status(&self) -> u16 {
        match self {
            ConvertError::Refused(r) if r.is_unreadable() => 422,
            ConvertError::Refused(_) | ConvertError::NotOffice(_) => 415,
            ConvertError::Inflation(InflationError::TooLarge { .. })
            | ConvertError::Inflation(InflationError::PartTooLarge { .. }) => 413,
            ConvertError::Inflation(_) => 422,
            ConvertError::NotConfigured
            | ConvertError::QueueFull { .. }
            | ConvertError::WaitTimeout { .. }
            | ConvertError::Busy { .. }
            | ConvertError::Unavailable { .. } => 503,
            ConvertError::Timeout { .. } => 504,
            ConvertError::Unreadable { .. }
            | ConvertError::PasswordRequired { .. }
            | ConvertError::TooLarge { .. } => 422,
            ConvertError::Failed { .. } | ConvertError::Upstream { .. } => 502,
        }
    }

    /// Seconds for a `Retry-After` header, where retrying later makes sense.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            ConvertError::QueueFull { retry_after_secs, .. }
            | ConvertError::WaitTimeout { retry_after_secs, .. }
            | ConvertError::Busy { retry_after_secs, .. }
            | ConvertError::Unavailable { retry_after_secs, .. } => Some(*retry_after_secs),
            _ => None,
        }
    }

    /// The same error with its `Retry-After` (if it has one) set to `secs`.
    pub fn with_retry_after(mut self, secs: u64) -> Self {
        match &mut self {
            ConvertError::QueueFull { retry_after_secs, .. }
            | ConvertError::WaitTimeout { retry_after_secs, .. }
            | ConvertError::Busy { retry_after_secs, .. }
            | ConvertError::Unavailable { retry_after_secs, .. } => *retry_after_secs = secs,
            _ => {}
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_statuses_and_retry_after() {
        let busy = ConvertError::Busy { attempts: 3, retry_after_secs: 1 }.with_retry_after(4);
        assert_eq!(
            (busy.code(), busy.status(), busy.retry_after_secs()),
            ("office_busy", 503, Some(4))
        );
        let epub = ConvertError::Refused(Refusal::Epub);
        assert_eq!((epub.code(), epub.status()), ("unsupported_format", 415));
        let damaged = ConvertError::Refused(Refusal::Damaged("cut".into()));
        assert_eq!((damaged.code(), damaged.status()), ("unreadable_document", 422));
        let macros = ConvertError::Refused(Refusal::MacroEnabled("a VBA project"));
        assert_eq!((macros.code(), macros.status()), ("macro_enabled_document", 415));
        let bomb = ConvertError::Inflation(InflationError::Bomb {
            part: "word/document.xml".into(),
            compressed: 1 << 20,
            inflated: 1 << 30,
            max: 100,
        });
        assert_eq!((bomb.code(), bomb.status()), ("office_inflate_bomb", 422));
        let big =
            ConvertError::Inflation(InflationError::TooLarge { inflated: 2 << 30, max: 1 << 30 });
        assert_eq!((big.code(), big.status()), ("office_inflated_too_large", 413));
        let part = ConvertError::Inflation(InflationError::PartTooLarge {
            part: "xl/worksheets/sheet1.xml".into(),
            inflated: 600 << 20,
            max: 512 << 20,
        });
        assert_eq!((part.code(), part.status()), ("office_inflated_too_large", 413));
        let timeout = ConvertError::Timeout { detail: "30000 ms".into() };
        assert_eq!(
            (timeout.code(), timeout.status(), timeout.retry_after_secs()),
            ("conversion_timeout", 504, None)
        );
        let off = ConvertError::NotConfigured;
        assert_eq!((off.code(), off.status()), ("office_not_configured", 503));
        assert!(off.to_string().contains("RENDERPOD_GOTENBERG_URL"));
    }
}
