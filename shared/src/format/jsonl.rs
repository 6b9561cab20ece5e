//! Reading a runtime's log of JSON records, one per line, leniently: what
//! the `codex-rollout-v1` and `gemini-cli-v1` codecs share (`claude-code-v1`
//! reads its own way, strictly one entry a line, and shares how a place is
//! named and how a line is written).
//!
//! The bytes are read as a sequence of JSON values separated by whitespace,
//! so a record written one per line (JSON Lines) and a whole document
//! pretty-printed over many lines (an older Gemini CLI session file) read
//! alike. What is not JSON is kept as written and reported, from where it
//! starts to the end of its line, bytes that are not UTF-8 too (a runtime's
//! bad write): nothing is refused.

use serde_json::Value;

use crate::error::Result;

/// One record of a log.
pub(super) struct Record {
    /// Where it starts.
    pub(super) offset: usize,
    /// Its line number, from 1.
    pub(super) number: usize,
    /// The record; `None` for bytes that are not JSON.
    pub(super) value: Option<Value>,
    /// What looks wrong about it, when something does.
    pub(super) problem: Option<String>,
}

/// `byte offset N (line L)`, how a log format names a place.
pub(super) fn at(offset: usize, number: usize) -> String {
    format!("byte offset {offset} (line {number})")
}

/// Hands each record of `bytes` to `f`, in order.
///
/// # Errors
/// Whatever `f` returns.
pub(super) fn each_record(bytes: &[u8], mut f: impl FnMut(Record) -> Result<()>) -> Result<()> {
    let lines = |range: &[u8]| range.iter().filter(|&&b| b == b'\n').count();
    let mut pos = 0;
    let mut number = 1;
    loop {
        let skip = bytes[pos..]
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(bytes.len() - pos);
        number += lines(&bytes[pos..pos + skip]);
        pos += skip;
        if pos == bytes.len() {
            return Ok(());
        }
        let line_end = |from: usize| {
            bytes[from..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |nl| from + nl)
        };
        let mut values = serde_json::Deserializer::from_slice(&bytes[pos..]).into_iter::<Value>();
        let (value, end, mut problem) = match values.next() {
            Some(Ok(v)) => {
                let end = pos + values.byte_offset();
                let rest = line_end(end);
                if bytes[end..rest].iter().all(u8::is_ascii_whitespace) {
                    (Some(v), end, None)
                } else {
                    // Text after a value on its line: the line is no record
                    // (`2026-11-21 started` is not three numbers).
                    let what = "not JSON: more than one value on the line";
                    (None, rest, Some(what.to_owned()))
                }
            }
            Some(Err(e)) => (None, line_end(pos), Some(format!("not JSON: {e}"))),
            None => return Ok(()),
        };
        if !bytes[end..].contains(&b'\n') && value.is_some() {
            problem = Some(format!(
                "a last line without a newline ({} bytes)",
                end - pos
            ));
        }
        f(Record {
            offset: pos,
            number,
            value,
            problem,
        })?;
        number += lines(&bytes[pos..end]);
        pos = end;
    }
}

/// Writes `v` as one line of a log.
pub(super) fn write_line(out: &mut Vec<u8>, v: &Value) {
    serde_json::to_writer(&mut *out, v).expect("a JSON value always serializes");
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(bytes: &[u8]) -> Vec<(usize, usize, bool, Option<String>)> {
        let mut out = Vec::new();
        each_record(bytes, |r| {
            out.push((r.offset, r.number, r.value.is_some(), r.problem));
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn lines_documents_and_garbage_are_records_with_their_places() {
        let got = records(b"{\"a\":1}\n\n{\n  \"b\": 2\n}\nnope nope\n{\"c\":3}");
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[0], (0, 1, true, None));
        assert_eq!(got[1], (9, 3, true, None));
        assert_eq!((got[2].0, got[2].1, got[2].2), (22, 6, false));
        assert!(got[2].3.as_deref().unwrap().starts_with("not JSON"));
        assert_eq!((got[3].1, got[3].2), (7, true));
        assert!(got[3].3.as_deref().unwrap().contains("without a newline"));
        // Bytes that are not UTF-8 are a record that is not JSON, kept.
        let got = records(b"{}\n{\"a\":\"\xff\"}\n{}\n");
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!((got[1].0, got[1].1, got[1].2), (3, 2, false));
        assert!(got[1].3.as_deref().unwrap().starts_with("not JSON"));
        assert!(records(b"  \n ").is_empty());
        let got = records(b"2026-11-21 started\n{} {}\n{}\n");
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!((got[0].1, got[0].2), (1, false));
        assert_eq!((got[1].1, got[1].2), (2, false));
        assert_eq!((got[2].1, got[2].2, &got[2].3), (3, true, &None));
    }
}
