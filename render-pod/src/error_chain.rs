//! An error with its causes on one line, for messages whose libraries' own text stops at the
//! first (reqwest's and hyper's "client error (Connect)" hides the refused certificate or the
//! refused connection behind it).

/// `error`, then each of its sources after `: `.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn every_cause_follows_its_error() {
        let inner = std::io::Error::other("the cause");
        assert_eq!(chain(&Outer(inner)), "outer: the cause");
        assert_eq!(chain(&std::io::Error::other("alone")), "alone");
    }
}
