//! Inline deltas at rest: how a backend stores a commit's inline artifact
//! bytes ([`Commit::inline`](crate::commit::Commit::inline)): zstd-packed
//! when that saves at least an eighth, raw otherwise, with a [`Compression`]
//! marker saying which. Values LZ4-packed by earlier versions stay
//! readable. Shared by the SQLite and DynamoDB backends (the memory backend
//! keeps the bytes as they are).
//!
//! The artifact reference stays the BLAKE3 hash of the uncompressed bytes:
//! readers verify it after [`unpack`]. A packed value is the uncompressed
//! length (4 bytes, little-endian) and one LZ4 block or one zstd frame; one
//! that does not decode to exactly that length is an `Internal` error,
//! never other bytes.
//!
//! zstd (level 3) keeps 0.48 of a transcript-like turn where LZ4 kept 0.71,
//! and 0.76 of base64 that LZ4 could not shrink (docs/bench.md, "Bytes
//! below raw").

use std::cell::RefCell;

use bytes::Bytes;

use crate::error::{Error, Result};

/// How inline bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// As they are (and every value written before compression existed).
    Raw,
    /// The uncompressed length, then one LZ4 block (written before zstd;
    /// read, no longer written).
    Lz4,
    /// [`pack`]ed: the uncompressed length, then one zstd frame.
    Zstd,
}

// The markers are SQLite's (the aws store tells the codecs apart by
// attribute name): a build without the local store has no use for them.
#[cfg(feature = "local")]
impl Compression {
    /// The marker stored beside the bytes (SQLite's `deltas.codec`).
    pub fn code(self) -> u8 {
        match self {
            Compression::Raw => 0,
            Compression::Lz4 => 1,
            Compression::Zstd => 2,
        }
    }

    /// The compression of a stored marker.
    ///
    /// # Errors
    /// `Internal` for a marker this build does not know.
    pub fn from_code(code: i64) -> Result<Self> {
        match code {
            0 => Ok(Compression::Raw),
            1 => Ok(Compression::Lz4),
            2 => Ok(Compression::Zstd),
            other => Err(Error::internal(format!(
                "an inline delta has unknown codec {other}"
            ))),
        }
    }
}

/// The length prefix of a packed value.
const LEN: usize = 4;

/// zstd's level for inline deltas: its default, the knee of size against
/// time on small JSON turns (levels 9 and 19 save 2% more; see the bench).
const LEVEL: i32 = 3;

/// The most a packed byte can stand for: LZ4's best ratio (one sequence
/// expands to at most 255 bytes per input byte), and zstd's (a run-length
/// block of up to 128 KiB from a few bytes). A length prefix above this
/// bound is corrupt and is refused before allocating for it.
fn max_ratio(codec: Compression) -> usize {
    match codec {
        Compression::Lz4 => 255,
        Compression::Zstd => 128 * 1024,
        Compression::Raw => 1,
    }
}

/// `bytes` as stored: zstd-packed when that saves at least an eighth of
/// them, as they are otherwise (random or already compressed bytes).
pub fn pack(bytes: &Bytes) -> (Compression, Bytes) {
    pack_as(Compression::Zstd, bytes)
}

/// `bytes` packed with `codec` when that saves at least an eighth, as
/// they are otherwise (tests write LZ4 with it, as earlier versions did).
pub(crate) fn pack_as(codec: Compression, bytes: &Bytes) -> (Compression, Bytes) {
    let raw = || (Compression::Raw, bytes.clone());
    let Ok(len) = u32::try_from(bytes.len()) else {
        return raw();
    };
    let worth = bytes.len() - bytes.len() / 8;
    if worth <= LEN {
        return raw();
    }
    let mut out = len.to_le_bytes().to_vec();
    let packed = match codec {
        Compression::Raw => return raw(),
        Compression::Lz4 => {
            out.resize(
                LEN + lz4_flex::block::get_maximum_output_size(bytes.len()),
                0,
            );
            lz4_flex::block::compress_into(bytes, &mut out[LEN..])
                .map(|n| out.truncate(LEN + n))
                .is_ok()
        }
        Compression::Zstd => match zstd_frame(bytes) {
            Ok(frame) => {
                out.extend_from_slice(&frame);
                true
            }
            Err(_) => false,
        },
    };
    if packed && out.len() <= worth {
        (codec, Bytes::from(out))
    } else {
        raw()
    }
}

/// One zstd frame of `bytes`, with its content checksum (4 bytes): a
/// damaged frame is an error here rather than other bytes of the right
/// length.
fn zstd_frame(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    thread_local! {
        static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> =
            const { RefCell::new(None) };
    }
    with_context(
        &COMPRESSOR,
        || {
            let mut c = zstd::bulk::Compressor::new(LEVEL)?;
            c.include_checksum(true)?;
            Ok(c)
        },
        |c| c.compress(bytes),
    )
}

/// `block`, one zstd frame, decoded to at most `len` bytes.
fn zstd_decode(block: &[u8], len: usize) -> std::io::Result<Vec<u8>> {
    thread_local! {
        static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
            const { RefCell::new(None) };
    }
    with_context(&DECOMPRESSOR, zstd::bulk::Decompressor::new, |d| {
        d.decompress(block, len)
    })
}

/// Runs `f` with this thread's zstd context in `slot`, made by `make` the
/// first time. Each thread keeps one compression and one decompression
/// context: making one allocates and clears ~1 MB, ~4% of the server's
/// samples under durable checkpoints over HTTP (docs/bench.md, "Lookups in
/// place").
fn with_context<C: 'static, T>(
    slot: &'static std::thread::LocalKey<RefCell<Option<C>>>,
    make: impl FnOnce() -> std::io::Result<C>,
    f: impl FnOnce(&mut C) -> std::io::Result<T>,
) -> std::io::Result<T> {
    slot.with_borrow_mut(|slot| {
        let c = match slot {
            Some(c) => c,
            None => slot.insert(make()?),
        };
        f(c)
    })
}

/// The bytes `stored` under `codec` hold.
///
/// # Errors
/// `Internal` when a packed value is corrupt: a short or implausible length
/// prefix, a block or frame that does not decode, or one that decodes to
/// another length.
pub fn unpack(codec: Compression, stored: Bytes) -> Result<Bytes> {
    if codec == Compression::Raw {
        return Ok(stored);
    }
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
    if len > block.len().saturating_mul(max_ratio(codec)) + 16 {
        return Err(corrupt(format!(
            "a length of {len} cannot come from {} packed bytes",
            block.len()
        )));
    }
    let out = match codec {
        Compression::Raw => unreachable!("returned above"),
        Compression::Lz4 => {
            let mut out = vec![0u8; len];
            let n = lz4_flex::block::decompress_into(block, &mut out)
                .map_err(|e| corrupt(e.to_string()))?;
            out.truncate(n);
            out
        }
        Compression::Zstd => zstd_decode(block, len).map_err(|e| corrupt(e.to_string()))?,
    };
    if out.len() != len {
        return Err(corrupt(format!(
            "{} bytes decoded, {len} expected",
            out.len()
        )));
    }
    Ok(Bytes::from(out))
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
        assert_eq!(codec, Compression::Zstd);
        assert!(packed.len() < t.len() / 4, "{} bytes", packed.len());
        assert_eq!(unpack(codec, packed).unwrap(), t);
    }

    /// Each thread reuses one zstd context for packing and one for
    /// unpacking: values of every size, interleaved, come back exact.
    #[test]
    fn a_reused_zstd_context_keeps_no_state_between_values() {
        let values: Vec<Bytes> = [300, 70_000, 1_000, 5_000, 400, 65_536, 2_048]
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let mut v = text(n);
                v.extend_from_slice(format!("value {i}").as_bytes());
                Bytes::from(v)
            })
            .collect();
        let packed: Vec<_> = values.iter().map(pack).collect();
        for round in 0..2 {
            for (v, (codec, stored)) in values.iter().zip(&packed).rev() {
                assert_eq!(*codec, Compression::Zstd, "round {round}");
                assert_eq!(&unpack(*codec, stored.clone()).unwrap()[..], &v[..]);
            }
        }
        // Packing again on the same thread gives the same frames.
        for (v, (_, stored)) in values.iter().zip(&packed) {
            assert_eq!(&pack(v).1, stored);
        }
    }

    #[test]
    fn values_packed_with_lz4_by_earlier_versions_still_read() {
        let t = text(5_500);
        let (codec, packed) = pack_as(Compression::Lz4, &Bytes::from(t.clone()));
        assert_eq!(codec, Compression::Lz4);
        assert_eq!(unpack(Compression::Lz4, packed).unwrap(), t);
    }

    #[test]
    fn incompressible_and_tiny_bytes_stay_raw() {
        for b in [noise(5_500), noise(1), Vec::new(), text(4)] {
            let (codec, stored) = pack(&Bytes::from(b.clone()));
            assert_eq!(codec, Compression::Raw, "{} bytes", b.len());
            assert_eq!(stored, b);
            assert_eq!(unpack(codec, stored).unwrap(), b);
        }
    }

    #[test]
    fn packing_must_save_an_eighth() {
        // Mostly noise: no codec saves an eighth of it.
        let mut b = noise(4_000);
        b.extend(text(400));
        for codec in [Compression::Lz4, Compression::Zstd] {
            assert_eq!(pack_as(codec, &Bytes::from(b.clone())).0, Compression::Raw);
        }
        let mut b = noise(1_000);
        b.extend(text(4_000));
        for codec in [Compression::Lz4, Compression::Zstd] {
            assert_eq!(pack_as(codec, &Bytes::from(b.clone())).0, codec);
        }
    }

    #[test]
    fn a_corrupt_packed_delta_is_an_error_not_other_bytes() {
        for codec in [Compression::Lz4, Compression::Zstd] {
            corrupt_values_are_errors(codec);
        }
    }

    fn corrupt_values_are_errors(codec: Compression) {
        let t = text(5_500);
        let (_, packed) = pack_as(codec, &Bytes::from(t.clone()));
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
        if codec == Compression::Lz4 {
            // A period of 8: the first sequence is 8 literals, then a match
            // whose offset (the two bytes after them) is made to point
            // before the start of the output.
            let (c, short) = pack_as(Compression::Lz4, &Bytes::from(b"abcdefgh".repeat(100)));
            assert_eq!(c, Compression::Lz4);
            let mut offset = short.to_vec();
            assert_eq!(offset[LEN] >> 4, 8, "8 literals first");
            offset[LEN + 9] = 0xFF;
            offset[LEN + 10] = 0xFF;
            cases.push(("match offset out of bounds", offset));
        } else {
            let mut flipped = packed.to_vec();
            let mid = LEN + (flipped.len() - LEN) / 2;
            flipped[mid] ^= 0xFF;
            flipped[mid + 1] ^= 0x55;
            cases.push(("bytes flipped mid-frame", flipped));
        }
        for (what, bad) in cases {
            let e = unpack(codec, Bytes::from(bad)).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Internal, "{what}: {e}");
            assert!(e.message.contains("corrupt"), "{what}: {}", e.message);
        }
    }

    #[cfg(feature = "local")]
    #[test]
    fn markers_round_trip_and_an_unknown_one_is_refused() {
        assert_eq!(
            Compression::from_code(7).unwrap_err().kind,
            ErrorKind::Internal,
            "an unknown marker"
        );
        for c in [Compression::Raw, Compression::Lz4, Compression::Zstd] {
            assert_eq!(Compression::from_code(c.code().into()).unwrap(), c);
        }
    }
}
