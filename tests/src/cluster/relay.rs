//! TCP relays to a server on the host's 127.0.0.1, for clients that cannot reach that address:
//! pods on the real node's bridge, and processes in a network namespace of the test's own.

use std::io::ErrorKind;
use std::net::{Shutdown, TcpListener, TcpStream};

/// Relays every connection `listener` accepts to 127.0.0.1:`target_port`, on threads named
/// after `name`, for as long as this process runs or the listener works.
pub(crate) fn serve(listener: TcpListener, name: &str, target_port: u16) -> std::io::Result<()> {
    let thread_name = name.to_string();
    std::thread::Builder::new().name(name.to_string()).spawn(move || {
        for client in listener.incoming() {
            match client {
                Ok(client) => relay(client, &thread_name, target_port),
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                // The listener's address went away (its bridge or namespace is being undone).
                Err(_) => return,
            }
        }
    })?;
    Ok(())
}

/// Copies both ways between a client's connection and a new one to the target.
fn relay(client: TcpStream, name: &str, target_port: u16) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", target_port)) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let (Ok(client_read), Ok(server_read)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let pipe = |mut from: TcpStream, mut to: TcpStream| {
        move || {
            let _ = std::io::copy(&mut from, &mut to);
            let _ = to.shutdown(Shutdown::Write);
        }
    };
    let builder = || std::thread::Builder::new().name(format!("{name}-pipe"));
    let _ = builder().spawn(pipe(client_read, server));
    let _ = builder().spawn(pipe(server_read, client));
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn bytes_go_through_both_ways_and_the_end_of_a_stream_follows() {
        let target = TcpListener::bind("127.0.0.1:0").unwrap();
        let target_port = target.local_addr().unwrap().port();
        let front = TcpListener::bind("127.0.0.1:0").unwrap();
        let front_port = front.local_addr().unwrap().port();
        serve(front, "relay-test", target_port).unwrap();

        let mut client = TcpStream::connect(("127.0.0.1", front_port)).unwrap();
        client.write_all(b"ping").unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let (mut upstream, _) = target.accept().unwrap();
        let mut got = Vec::new();
        upstream.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"ping");
        upstream.write_all(b"pong").unwrap();
        drop(upstream);
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).unwrap();
        assert_eq!(answer, b"pong");
    }
}
