//! Inline deltas at rest: how a backend stores a commit's inline artifact
//! bytes ([`Commit::inline`](crate::commit::Commit::inline)), LZ4-compressed
//! when that saves at least an eighth, raw otherwise, with a [`Codec`]
//! marker saying which. Shared by the SQLite and DynamoDB backends (the
//! memory backend keeps the bytes as they are).
//!
//! The artifact reference stays the BLAKE3 hash of the uncompressed bytes:
//! readers verify it after [`unpack`]. A packed value is the uncompressed
//! length (4 bytes, little-endian) and one LZ4 block; one that does not
//! decode to exactly that length is an `Internal` error, never other bytes.

use bytes::Bytes;

use crate::error::{Error, Result};

/// How inline bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// As they are (and every value written before compression existed).
    Raw,
    /// [`pack`]ed: the uncompressed length, then one LZ4 block.
    Lz4,
}

// The markers are SQLite's (the aws store tells the codecs apart by
// attribute name): a build without the local store has no use for them.
#[cfg(feature = "local")]
impl Codec {
    /// The marker stored beside the bytes (SQLite's `deltas.codec`).
    pub fn code(self) -> u8 {
        match self {
            Codec::Raw => 0,
            Codec::Lz4 => 1,
        }
    }

    /// The codec of a stored marker.
    ///
    /// # Errors
    /// `Internal` for a marker this build does not know.
    pub fn from_code(code: i64) -> Result<Self> {
        match code {
            0 => Ok(Codec::Raw),
            1 => Ok(Codec::Lz4),
            other => Err(Error::internal(format!(
                "an inline delta has unknown codec {other}"
            ))),
        }
    }
}

/// The length prefix of a packed value.
const LEN: usize = 4;

/// LZ4's best ratio: one sequence of a few bytes expands to at most 255
/// bytes per input byte (plus a little), so a length prefix above this
/// bound is corrupt and is refused before allocating for it.
const MAX_RATIO: usize = 255;

/// `bytes` as stored: LZ4-packed when that saves at least an eighth of
/// them, as they are otherwise (random or already compressed bytes).
pub fn pack(bytes: &Bytes) -> (Codec, Bytes) {
    let raw = || (Codec::Raw, bytes.clone());
    let Ok(len) = u32::try_from(bytes.len()) else {
        return raw();
    };
    let worth = bytes.len() - bytes.len() / 8;
    if worth <= LEN {
        return raw();
    }
    let mut out = vec![0u8; LEN + lz4_flex::block::get_maximum_output_size(bytes.len())];
    out[..LEN].copy_from_slice(&len.to_le_bytes());
    match lz4_flex::block::compress_into(bytes, &mut out[LEN..]) {
        Ok(n) if LEN + n <= worth => {
            out.truncate(LEN + n);
            (Codec::Lz4, Bytes::from(out))
        }
        _ => raw(),
    }
}

/// The bytes `stored` under `codec` hold.
///
/// # Errors
/// `Internal` when a packed value is corrupt: a short or implausible length
/// prefix, an LZ4 block that does not decode, or one that decodes to
/// another length.
pub fn unpack(codec: Codec, stored: Bytes) -> Result<Bytes> {
    match codec {
        Codec::Raw => Ok(stored),
        Codec::Lz4 => {
            let corrupt = |what: String| {
                Error::internal(format!(
                    "an inline delta is corrupt ({} bytes packed): {what}",
                    stored.len()
                ))
            };
            let Some((prefix, block)) = stored.split_first_chunk::<LEN>() else {
                return Err(corrupt("no length prefix".into()));
            };
            let len = u32::from_le_bytes(*prefix) as usize;
            if len > block.len().saturating_mul(MAX_RATIO) + 16 {
                return Err(corrupt(format!(
                    "a length of {len} cannot come from {} bytes of LZ4",
                    block.len()
                )));
            }
            let mut out = vec![0u8; len];
            let n = lz4_flex::block::decompress_into(block, &mut out)
                .map_err(|e| corrupt(e.to_string()))?;
            if n != len {
                return Err(corrupt(format!("{n} bytes decoded, {len} expected")));
            }
            Ok(Bytes::from(out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn text(n: usize) -> Vec<u8> {
        b"the agent called the tool and read the file; "
            .iter()
            .copied()
            .cycle()
            .take(n)
            .collect()
    }

    /// Bytes no compressor shrinks (a xorshift stream).
    fn noise(n: usize) -> Vec<u8> {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn compressible_bytes_are_packed_and_come_back() {
        let t = text(5_500);
        let (codec, packed) = pack(&Bytes::from(t.clone()));
        assert_eq!(codec, Codec::Lz4);
        assert!(packed.len() < t.len() / 4, "{} bytes", packed.len());
        assert_eq!(unpack(codec, packed).unwrap(), t);
    }

    #[test]
    fn incompressible_and_tiny_bytes_stay_raw() {
        for b in [noise(5_500), noise(1), Vec::new(), text(4)] {
            let (codec, stored) = pack(&Bytes::from(b.clone()));
            assert_eq!(codec, Codec::Raw, "{} bytes", b.len());
            assert_eq!(stored, b);
            assert_eq!(unpack(codec, stored).unwrap(), b);
        }
    }

    #[test]
    fn packing_must_save_an_eighth() {
        // Half text, half noise: LZ4 saves less than an eighth of it.
        let mut b = noise(4_000);
        b.extend(text(400));
        assert_eq!(pack(&Bytes::from(b)).0, Codec::Raw);
        let mut b = noise(1_000);
        b.extend(text(4_000));
        assert_eq!(pack(&Bytes::from(b)).0, Codec::Lz4);
    }

    #[test]
    fn a_corrupt_packed_delta_is_an_error_not_other_bytes() {
        let t = text(5_500);
        let (_, packed) = pack(&Bytes::from(t.clone()));
        let mut cases: Vec<(&str, Vec<u8>)> = vec![
            ("empty", Vec::new()),
            ("short prefix", packed[..3].to_vec()),
            ("truncated block", packed[..packed.len() / 2].to_vec()),
        ];
        let mut longer = packed.to_vec();
        longer[..LEN].copy_from_slice(&(t.len() as u32 + 1).to_le_bytes());
        cases.push(("length one too long", longer));
        let mut shorter = packed.to_vec();
        shorter[..LEN].copy_from_slice(&(t.len() as u32 - 1).to_le_bytes());
        cases.push(("length one too short", shorter));
        let mut huge = packed.to_vec();
        huge[..LEN].copy_from_slice(&u32::MAX.to_le_bytes());
        cases.push(("implausible length", huge));
        // A period of 8: the first sequence is 8 literals, then a match
        // whose offset (the two bytes after them) is made to point before
        // the start of the output.
        let (codec, short) = pack(&Bytes::from(b"abcdefgh".repeat(100)));
        assert_eq!(codec, Codec::Lz4);
        let mut offset = short.to_vec();
        assert_eq!(offset[LEN] >> 4, 8, "8 literals first");
        offset[LEN + 9] = 0xFF;
        offset[LEN + 10] = 0xFF;
        cases.push(("match offset out of bounds", offset));
        for (what, bad) in cases {
            let e = unpack(Codec::Lz4, Bytes::from(bad)).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Internal, "{what}: {e}");
            assert!(e.message.contains("corrupt"), "{what}: {}", e.message);
        }
    }

    #[cfg(feature = "local")]
    #[test]
    fn markers_round_trip_and_an_unknown_one_is_refused() {
        assert_eq!(
            Codec::from_code(7).unwrap_err().kind,
            ErrorKind::Internal,
            "an unknown marker"
        );
        for c in [Codec::Raw, Codec::Lz4] {
            assert_eq!(Codec::from_code(c.code().into()).unwrap(), c);
        }
    }
}
