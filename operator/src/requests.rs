//! Counts every request the kube client sends, by verb, for the API-cost figures.

use crate::metrics::Metrics;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::{Layer, Service};

/// A tower layer that records each outgoing request in [`Metrics`].
#[derive(Debug, Clone)]
pub struct CountRequests(pub Arc<Metrics>);

impl<S> Layer<S> for CountRequests {
    type Service = Counted<S>;
    fn layer(&self, inner: S) -> Counted<S> {
        Counted { inner, metrics: self.0.clone() }
    }
}

/// The service [`CountRequests`] wraps around the client's stack.
#[derive(Debug, Clone)]
pub struct Counted<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, B> Service<http::Request<B>> for Counted<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        self.metrics.request(verb(request.method(), request.uri().query()));
        self.inner.call(request)
    }
}

/// The Kubernetes verb of a request: watches are GETs with `watch=true`.
pub fn verb(method: &http::Method, query: Option<&str>) -> &'static str {
    let watch = query.is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    match *method {
        http::Method::GET if watch => "watch",
        http::Method::GET => "get",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_are_told_apart_from_reads() {
        assert_eq!(verb(&http::Method::GET, Some("labelSelector=a&watch=true")), "watch");
        assert_eq!(verb(&http::Method::GET, Some("limit=500")), "get");
        assert_eq!(verb(&http::Method::GET, None), "get");
        assert_eq!(verb(&http::Method::PATCH, Some("fieldManager=x")), "patch");
    }
}
