//! An answer's bulk bytes (an encoded image, a PDF): one byte string on the worker pipe and, on
//! the supervisor's side, a slice of the frame it arrived in. Decoding a frame inside
//! [`decode_sharing`] makes each payload share the frame's memory instead of copying it, so a
//! large answer is held once from the pipe to the socket (and the frame's budget reservation,
//! attached to that memory, lasts exactly as long as the bytes do).

use std::cell::RefCell;
use std::fmt;
use std::ops::Deref;

use bytes::Bytes;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

thread_local! {
    /// The frame being decoded on this thread, if [`decode_sharing`] is running.
    static FRAME: RefCell<Option<Bytes>> = const { RefCell::new(None) };
}

/// Runs `decode` on `frame` so that every [`Payload`] it decodes borrowing from the frame is a
/// slice of `frame` (no copy). Payloads decoded elsewhere are copied, as any byte string is.
pub fn decode_sharing<R>(frame: &Bytes, decode: impl FnOnce(&[u8]) -> R) -> R {
    /// Clears the frame again, even if `decode` panics.
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            FRAME.with_borrow_mut(|frame| *frame = None);
        }
    }
    FRAME.with_borrow_mut(|current| *current = Some(frame.clone()));
    let _reset = Reset;
    decode(frame)
}

/// `bytes` as a slice of the frame being decoded when they lie inside it, else a copy.
fn shared(bytes: &[u8]) -> Bytes {
    FRAME.with_borrow(|frame| match frame {
        Some(frame) if within(frame, bytes) => frame.slice_ref(bytes),
        _ => Bytes::copy_from_slice(bytes),
    })
}

fn within(outer: &[u8], inner: &[u8]) -> bool {
    let outer = outer.as_ptr_range();
    let inner = inner.as_ptr_range();
    outer.start <= inner.start && inner.end <= outer.end
}

/// Encoded bytes that cross the pipe as one byte string (a plain `Vec<u8>` would be encoded
/// and decoded element by element, measured at 10% of the front's CPU).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Payload(Bytes);

impl Payload {
    /// The bytes, without a copy.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Self {
        Self(Bytes::from(bytes))
    }
}

impl Deref for Payload {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for Payload {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Payload({} bytes)", self.0.len())
    }
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_bytes(PayloadVisitor)
    }
}

struct PayloadVisitor;

impl<'de> Visitor<'de> for PayloadVisitor {
    type Value = Payload;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a byte string")
    }

    fn visit_borrowed_bytes<E: de::Error>(self, bytes: &'de [u8]) -> Result<Payload, E> {
        Ok(Payload(shared(bytes)))
    }

    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Payload, E> {
        Ok(Payload(Bytes::copy_from_slice(bytes)))
    }

    fn visit_byte_buf<E: de::Error>(self, bytes: Vec<u8>) -> Result<Payload, E> {
        Ok(Payload::from(bytes))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Payload, A::Error> {
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(byte) = seq.next_element()? {
            bytes.push(byte);
        }
        Ok(Payload::from(bytes))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[derive(Debug, Serialize, Deserialize)]
    struct Message {
        before: u32,
        payload: Payload,
        after: String,
    }

    #[test]
    fn a_payload_decoded_from_a_frame_shares_its_memory() {
        let sent =
            Message { before: 7, payload: Payload::from(vec![9u8; 4096]), after: "x".into() };
        let frame = Bytes::from(postcard::to_stdvec(&sent).unwrap());
        let shared: Message = decode_sharing(&frame, |f| postcard::from_bytes(f)).unwrap();
        assert_eq!(
            (shared.before, &shared.payload[..], &shared.after[..]),
            (7, &[9u8; 4096][..], "x")
        );
        assert!(within(&frame, &shared.payload), "a slice of the frame, not a copy");
        // Outside `decode_sharing` the same bytes are copied, and the frame is forgotten.
        let copied: Message = postcard::from_bytes(&frame).unwrap();
        assert_eq!(copied.payload, shared.payload);
        assert!(!within(&frame, &copied.payload));
        // Other formats still read it (JSON writes a byte string as an array).
        let json = serde_json::to_string(&sent).unwrap();
        let back: Message = serde_json::from_str(&json).unwrap();
        assert_eq!(back.payload, sent.payload);
    }
}
