//! Binding a listen address: the IPv6 wildcard (`[::]`) means every interface of both address
//! families, and IPv4 alone where the kernel has no IPv6.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use tokio::net::TcpListener;

/// Binds `addr`. The IPv6 wildcard becomes `0.0.0.0` on the same port where the kernel has no
/// IPv6, with a log line saying so.
pub async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    match TcpListener::bind(addr).await {
        Err(err) if lacks_ipv6(addr, &err) => {
            let v4 = SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), addr.port());
            tracing::warn!(%addr, fallback = %v4, error = %err, "no IPv6 here; listening on IPv4 only");
            TcpListener::bind(v4).await
        }
        bound => bound,
    }
}

/// True when binding the IPv6 wildcard failed because the kernel has no IPv6 (EAFNOSUPPORT) or
/// has it turned off (EADDRNOTAVAIL).
fn lacks_ipv6(addr: SocketAddr, err: &io::Error) -> bool {
    let any_v6 = addr.is_ipv6() && addr.ip().is_unspecified();
    any_v6 && matches!(err.raw_os_error(), Some(libc::EAFNOSUPPORT | libc::EADDRNOTAVAIL))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn only_the_ipv6_wildcard_falls_back_and_only_without_ipv6() {
        let any: SocketAddr = "[::]:8080".parse().unwrap();
        let err = io::Error::from_raw_os_error;
        assert!(lacks_ipv6(any, &err(libc::EAFNOSUPPORT)));
        assert!(lacks_ipv6(any, &err(libc::EADDRNOTAVAIL)));
        assert!(!lacks_ipv6(any, &err(libc::EADDRINUSE)), "a port in use is a real error");
        assert!(!lacks_ipv6("[::1]:8080".parse().unwrap(), &err(libc::EAFNOSUPPORT)));
        assert!(!lacks_ipv6("127.0.0.1:8080".parse().unwrap(), &err(libc::EAFNOSUPPORT)));
    }
}
