//! A small TCP balancer on 127.0.0.1 that stands in for a Kubernetes Service: each new connection
//! goes to a backend picked at random (as kube-proxy's iptables mode does), and bytes are copied
//! both ways until either side closes. For benchmarks of several Gotenberg instances.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A running balancer; stops accepting when dropped.
pub struct Balancer {
    addr: SocketAddr,
    accept: JoinHandle<()>,
}

impl Balancer {
    /// Listens on a free 127.0.0.1 port and spreads connections over `backends`.
    pub async fn start(backends: Vec<SocketAddr>) -> std::io::Result<Balancer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let backends = Arc::new(backends);
        let seed = AtomicU64::new(u64::from(std::process::id()) | 1);
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let pick = next_random(&seed) % backends.len().max(1) as u64;
                let Some(&backend) = backends.get(pick as usize) else { continue };
                tokio::spawn(async move {
                    if let Ok(mut upstream) = TcpStream::connect(backend).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    }
                });
            }
        });
        Ok(Balancer { addr, accept })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// xorshift64: enough randomness to spread connections, no extra crate.
fn next_random(state: &AtomicU64) -> u64 {
    let mut x = state.load(Ordering::Relaxed);
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    state.store(x, Ordering::Relaxed);
    x
}
