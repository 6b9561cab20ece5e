//! Large text fields of a request body without a second copy of the body.
//!
//! A checkpoint's `delta` / `delta_base64` can be most of a 90 MB JSON body.
//! Deserialized as a `String` it is copied out of the body, so the process
//! holds both at once. [`BodyText`] instead shares the body's buffer when
//! the JSON string has no escapes (always so for base64): while
//! [`with_source`] runs a parse over a body's [`Bytes`], a `BodyText` is a
//! [`Bytes::slice_ref`] of it. [`decode_base64`] then decodes such a slice
//! in place, in the buffer it already holds, once nothing else holds it:
//! a base64 checkpoint costs its body and no more.

use std::cell::RefCell;
use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

thread_local! {
    /// The body being parsed on this thread, while [`with_source`] runs.
    static SOURCE: RefCell<Option<Bytes>> = const { RefCell::new(None) };
}

/// Runs `parse` (a synchronous deserialization of `body`) so that the
/// [`BodyText`] values it makes share `body`'s buffer.
pub fn with_source<T>(body: &Bytes, parse: impl FnOnce(&[u8]) -> T) -> T {
    struct Reset(Option<Bytes>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let previous = self.0.take();
            SOURCE.with(|s| *s.borrow_mut() = previous);
        }
    }
    let previous = SOURCE.with(|s| s.borrow_mut().replace(body.clone()));
    let _reset = Reset(previous);
    parse(body)
}

/// UTF-8 text of a request field, sharing the request body's buffer when
/// it was parsed under [`with_source`] and had no escapes; otherwise its
/// own copy. Serialized as a JSON string.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct BodyText(Bytes);

impl BodyText {
    /// The text's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The bytes, without a copy.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// The text (checked again: used only for small values and display).
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("BodyText holds UTF-8 by construction")
    }

    /// A slice of the body being parsed, when `s` lies in it.
    fn borrowed(s: &str) -> BodyText {
        let shared = SOURCE.with(|src| {
            let src = src.borrow();
            let body = src.as_ref()?;
            let (start, end) = (body.as_ptr() as usize, body.as_ptr() as usize + body.len());
            let p = s.as_ptr() as usize;
            (p >= start && p + s.len() <= end).then(|| body.slice_ref(s.as_bytes()))
        });
        BodyText(shared.unwrap_or_else(|| Bytes::copy_from_slice(s.as_bytes())))
    }
}

impl From<String> for BodyText {
    fn from(s: String) -> Self {
        BodyText(Bytes::from(s.into_bytes()))
    }
}

impl From<&str> for BodyText {
    fn from(s: &str) -> Self {
        BodyText(Bytes::copy_from_slice(s.as_bytes()))
    }
}

impl fmt::Debug for BodyText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.len() <= 64 {
            write!(f, "{:?}", self.as_str())
        } else {
            write!(f, "<{} bytes of text>", self.len())
        }
    }
}

impl Serialize for BodyText {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for BodyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = BodyText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<BodyText, E> {
                // Borrowed from the input or a scratch copy: `borrowed`
                // shares the body only when `s` lies in it.
                Ok(BodyText::borrowed(s))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<BodyText, E> {
                Ok(BodyText::from(s))
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// Base64 (standard alphabet, padded) decoded, in place in `text`'s buffer
/// when nothing else holds it (the body it was parsed from is gone), else
/// into a new buffer. Accepts and refuses exactly what
/// `STANDARD.decode` does, with the same errors.
///
/// # Errors
/// The decoder's error for input that is not such base64.
pub fn decode_base64(text: BodyText) -> Result<Bytes, base64::DecodeError> {
    match text.0.try_into_mut() {
        Ok(mut buf) => {
            let n = decode_in_place(&mut buf)?;
            buf.truncate(n);
            Ok(buf.freeze())
        }
        Err(shared) => STANDARD.decode(&shared).map(Bytes::from),
    }
}

/// Input bytes decoded per step: a multiple of 4, so each step is whole
/// base64 quanta.
const STEP: usize = 4 * 1024;

/// Decodes `buf` into its own first bytes, step by step: the output of a
/// step (three quarters of its input) is written at or before where its
/// input started, so no unread input is overwritten. Padding is valid only
/// in the last step; anywhere else it is reported as the whole-input
/// decoder reports it.
fn decode_in_place(buf: &mut [u8]) -> Result<usize, base64::DecodeError> {
    use base64::DecodeError;
    let len = buf.len();
    let mut out = [0u8; STEP / 4 * 3];
    let (mut r, mut w) = (0, 0);
    while r < len {
        let end = (r + STEP).min(len);
        if end < len
            && let Some(i) = buf[r..end].iter().position(|&b| b == b'=')
        {
            // Padding before the last quantum: let the reference decoder
            // name it, from the quantum on (earlier input was valid).
            let q = r + i / 4 * 4;
            let tail = &buf[q..(q + 8).min(len)];
            return Err(match STANDARD.decode(tail) {
                Err(DecodeError::InvalidByte(o, b)) => DecodeError::InvalidByte(q + o, b),
                Err(DecodeError::InvalidLastSymbol(o, b)) => {
                    DecodeError::InvalidLastSymbol(q + o, b)
                }
                Err(e) => e,
                Ok(_) => DecodeError::InvalidByte(r + i, b'='),
            });
        }
        let n = STANDARD
            .decode_slice(&buf[r..end], &mut out)
            .map_err(|e| match e {
                base64::DecodeSliceError::DecodeError(DecodeError::InvalidByte(o, b)) => {
                    DecodeError::InvalidByte(r + o, b)
                }
                base64::DecodeSliceError::DecodeError(DecodeError::InvalidLastSymbol(o, b)) => {
                    DecodeError::InvalidLastSymbol(r + o, b)
                }
                base64::DecodeSliceError::DecodeError(DecodeError::InvalidLength(n)) => {
                    DecodeError::InvalidLength(r + n)
                }
                base64::DecodeSliceError::DecodeError(e) => e,
                base64::DecodeSliceError::OutputSliceTooSmall => {
                    unreachable!("a step of 4k base64 decodes to at most 3k bytes")
                }
            })?;
        buf[w..w + n].copy_from_slice(&out[..n]);
        w += n;
        r = end;
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_place(input: &[u8]) -> Result<Vec<u8>, String> {
        let mut buf = input.to_vec();
        decode_in_place(&mut buf)
            .map(|n| buf[..n].to_vec())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn in_place_decoding_matches_the_reference_decoder() {
        let long = STANDARD.encode((0..10_000u32).map(|i| i as u8).collect::<Vec<_>>());
        let mut cases: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"QQ==".to_vec(),
            b"QUI=".to_vec(),
            b"QUJD".to_vec(),
            b"QUJ".to_vec(),
            b"QU JD".to_vec(),
            b"QR==".to_vec(),
            b"QQ==QUJD".to_vec(),
            b"Q===".to_vec(),
            long.clone().into_bytes(),
        ];
        // Bad bytes and padding on both sides of a step boundary, and a
        // truncated long input.
        for at in [0, 1, STEP - 1, STEP, STEP + 1, 2 * STEP + 2, long.len() - 1] {
            for bad in [b' ', b'=', b'-', b'\n'] {
                let mut c = long.clone().into_bytes();
                c[at] = bad;
                cases.push(c);
            }
        }
        cases.push(long.as_bytes()[..long.len() - 1].to_vec());
        cases.push(long.as_bytes()[..STEP + 3].to_vec());
        let mut padded_at_boundary = long.as_bytes()[..STEP].to_vec();
        padded_at_boundary[STEP - 2..].copy_from_slice(b"==");
        padded_at_boundary.extend_from_slice(b"QUJD");
        cases.push(padded_at_boundary);
        for c in cases {
            let want = STANDARD.decode(&c).map_err(|e| e.to_string());
            assert_eq!(
                in_place(&c),
                want,
                "{:?}",
                String::from_utf8_lossy(&c[..c.len().min(40)])
            );
        }
    }

    #[test]
    fn text_parsed_under_its_body_shares_the_buffer_and_decodes_in_place() {
        #[derive(Deserialize)]
        struct Req {
            b64: BodyText,
            text: BodyText,
        }
        let payload = vec![7u8; 50_000];
        let body = Bytes::from(format!(
            r#"{{"b64": "{}", "text": "a\nb"}}"#,
            STANDARD.encode(&payload)
        ));
        let req: Req = with_source(&body, |b| serde_json::from_slice(b)).unwrap();
        let inside = body.as_ptr_range();
        assert!(
            inside.contains(&req.b64.as_bytes().as_ptr()),
            "the base64 shares the body"
        );
        assert_eq!(req.text.as_bytes(), b"a\nb", "an escaped string is a copy");
        assert!(!inside.contains(&req.text.as_bytes().as_ptr()));
        let b64_at = req.b64.as_bytes().as_ptr();
        // While the body is held, decoding copies; once it is gone, it
        // happens in the body's own buffer.
        let copy = decode_base64(req.b64.clone()).unwrap();
        assert_eq!(copy, payload);
        drop(body);
        let text = req.text;
        drop(text);
        let decoded = decode_base64(req.b64).unwrap();
        assert_eq!(decoded, payload);
        assert_eq!(decoded.as_ptr(), b64_at, "decoded in place");
        // Outside with_source, nothing is shared.
        let body = Bytes::from_static(br#"{"b64": "QQ==", "text": "x"}"#);
        let req: Req = serde_json::from_slice(&body).unwrap();
        assert!(!body.as_ptr_range().contains(&req.b64.as_bytes().as_ptr()));
    }
}
