//! Identifiers: the BLAKE3 [`Hash`](struct@Hash), prefixed ids (`art-…`, `ctx-…`,
//! `br-…`) and the validated names (tenant, principal, ref) that key data.
//!
//! Every id has a validating `FromStr`; nothing stringly-typed crosses a
//! module boundary.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

use crate::error::{Error, Result};

/// A BLAKE3 hash: hex in text (`Display`, `FromStr`, JSON), 32 raw bytes in
/// binary serializations such as CBOR.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hash([u8; 32]);

impl Hash {
    /// Hashes `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Hash(*blake3::hash(bytes).as_bytes())
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Wraps raw bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Hash(bytes)
    }

    /// Lower-case hex, 64 characters.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl From<blake3::Hash> for Hash {
    fn from(h: blake3::Hash) -> Self {
        Hash(*h.as_bytes())
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hash({self})")
    }
}

impl FromStr for Hash {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(Hash(parse_lower_hex::<32>(s).ok_or_else(|| {
            Error::invalid("hash", format!("{s:?} is not 64 lower-case hex digits"))
        })?))
    }
}

impl Serialize for Hash {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&self.to_hex())
        } else {
            s.serialize_bytes(&self.0)
        }
    }
}

impl<'de> Deserialize<'de> for Hash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let s = String::deserialize(d)?;
            s.parse().map_err(serde::de::Error::custom)
        } else {
            struct V;
            impl serde::de::Visitor<'_> for V {
                type Value = Hash;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("32 bytes")
                }
                fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Hash, E> {
                    let arr: [u8; 32] = v
                        .try_into()
                        .map_err(|_| E::invalid_length(v.len(), &self))?;
                    Ok(Hash(arr))
                }
            }
            d.deserialize_bytes(V)
        }
    }
}

/// Parses exactly `N` bytes of lower-case hex.
fn parse_lower_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != N * 2 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

fn string_schema(pattern: &str, description: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(pattern))
        .description(Some(description))
        .into()
}

/// The schema of a validated name: what `check_name` and the type's rule
/// accept, as a pattern and a length. JSON Schema counts characters where
/// the rule counts bytes; the description says which.
fn name_schema(pattern: &str, max_bytes: usize, description: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(pattern))
        .min_length(Some(1))
        .max_length(Some(max_bytes))
        .description(Some(description))
        .into()
}

/// Declares a `prefix-<hex>` id newtype over `N` bytes.
macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $n:literal, $field:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name([u8; $n]);

        impl $name {
            /// The id's prefix, with its dash.
            pub const PREFIX: &'static str = $prefix;

            /// Wraps raw bytes.
            pub fn from_bytes(bytes: [u8; $n]) -> Self {
                $name(bytes)
            }

            /// The raw bytes.
            pub fn as_bytes(&self) -> &[u8; $n] {
                &self.0
            }

            /// The hex part, without the prefix.
            pub fn hex(&self) -> String {
                hex::encode(self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}{}", $prefix, self.hex())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                s.strip_prefix($prefix)
                    .and_then(parse_lower_hex::<$n>)
                    .map($name)
                    .ok_or_else(|| {
                        Error::invalid(
                            $field,
                            format!(
                                "{s:?} is not a valid id: expected {} followed by {} lower-case hex digits",
                                $prefix,
                                $n * 2
                            ),
                        )
                    })
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = std::borrow::Cow::<str>::deserialize(d)?;
                s.parse().map_err(|e: Error| serde::de::Error::custom(e.message))
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                // Two hex digits a byte: the pattern counts digits, not bytes.
                string_schema(
                    &format!("^{}[0-9a-f]{{{}}}$", $prefix, $n * 2),
                    &format!("An id: `{}` and {} lower-case hex digits.", $prefix, $n * 2),
                )
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

prefixed_id!(
    /// A commit id, `ctx-` + 32 hex digits, derived from the commit's inputs.
    CommitId,
    "ctx-",
    16,
    "id"
);

prefixed_id!(
    /// A context-folding branch id, `br-` + 32 hex digits.
    BranchId,
    "br-",
    16,
    "branch_id"
);

impl CommitId {
    /// Derives the id of a commit from what makes it unique: the tenant, the
    /// parent, the artifact, the checkpoint time (µs since the epoch) and
    /// the template. The same checkpoint sent twice gets the same id.
    pub fn derive(
        tenant: &TenantId,
        parent: Option<&CommitId>,
        artifact: &ArtifactRef,
        created_at_micros: i64,
        template: &str,
    ) -> Self {
        let mut h = blake3::Hasher::new_derive_key("ctx commit id v1");
        let mut field = |bytes: &[u8]| {
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        field(tenant.as_str().as_bytes());
        field(parent.map(|p| &p.0[..]).unwrap_or(&[]));
        field(artifact.hash().as_bytes());
        field(&created_at_micros.to_le_bytes());
        field(template.as_bytes());
        let mut id = [0u8; 16];
        id.copy_from_slice(&h.finalize().as_bytes()[..16]);
        CommitId(id)
    }
}

/// An artifact reference, `art-` + the 64-hex BLAKE3 hash of its bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArtifactRef(Hash);

impl ArtifactRef {
    /// The prefix, with its dash.
    pub const PREFIX: &'static str = "art-";

    /// The reference of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        ArtifactRef(Hash::of(bytes))
    }

    /// The reference of a known hash.
    pub fn from_hash(hash: Hash) -> Self {
        ArtifactRef(hash)
    }

    /// The content hash.
    pub fn hash(&self) -> &Hash {
        &self.0
    }
}

impl fmt::Display for ArtifactRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "art-{}", self.0)
    }
}

impl fmt::Debug for ArtifactRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for ArtifactRef {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        s.strip_prefix("art-")
            .and_then(parse_lower_hex::<32>)
            .map(|b| ArtifactRef(Hash(b)))
            .ok_or_else(|| {
                Error::invalid(
                    "artifact_ref",
                    format!("{s:?} is not a valid artifact ref: expected art- followed by 64 lower-case hex digits"),
                )
            })
    }
}

impl Serialize for ArtifactRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ArtifactRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<str>::deserialize(d)?;
        s.parse()
            .map_err(|e: Error| serde::de::Error::custom(e.message))
    }
}

impl utoipa::PartialSchema for ArtifactRef {
    fn schema() -> RefOr<Schema> {
        string_schema(
            "^art-[0-9a-f]{64}$",
            "An artifact: `art-` and the BLAKE3 hash of its bytes in lower-case hex.",
        )
    }
}

impl utoipa::ToSchema for ArtifactRef {}

/// Checks a name against a character rule and a length limit.
fn check_name(
    field: &str,
    s: &str,
    max: usize,
    what: &str,
    ok: impl Fn(usize, char) -> bool,
) -> Result<()> {
    if s.is_empty() {
        return Err(Error::invalid(field, format!("{field} must not be empty")));
    }
    if s.len() > max {
        return Err(Error::invalid(
            field,
            format!(
                "{field} is {} bytes long; at most {max} are allowed",
                s.len()
            ),
        ));
    }
    if let Some((i, c)) = s.char_indices().find(|&(i, c)| !ok(i, c)) {
        return Err(Error::invalid(
            field,
            format!("{field} {s:?} has {c:?} at byte {i}; {what}"),
        ));
    }
    Ok(())
}

/// Declares a validated string newtype.
macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $field:literal, $check:expr, schema: $schema:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The name as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:?}", self.0)
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                let check: fn(&str) -> Result<()> = $check;
                check(s)?;
                Ok($name(s.to_owned()))
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(|e: Error| serde::de::Error::custom(e.message))
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                $schema
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

name_type!(
    /// A tenant: 1–64 characters of `a-z 0-9 - _`, starting with a letter
    /// or digit. Every stored key starts with it.
    TenantId,
    "tenant",
    |s| check_name("tenant", s, 64, "use a-z, 0-9, - and _, starting with a letter or digit", |i, c| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || (i > 0 && (c == '-' || c == '_'))
    }),
    schema: name_schema(
        "^[a-z0-9][a-z0-9_-]*$",
        64,
        "A tenant: 1 to 64 of a-z, 0-9, '-' and '_', starting with a letter or digit.",
    )
);

name_type!(
    /// Who checkpointed: an agent, a user or a service; up to 256 bytes of
    /// printable text.
    Principal,
    "principal",
    |s| check_name("principal", s, 256, "control characters are not allowed", |_, c| !c.is_control()),
    schema: name_schema(
        "^[^\\x00-\\x1f\\x7f-\\x9f]*$",
        256,
        "Who checkpointed: 1 to 256 bytes of UTF-8 text without control characters.",
    )
);

name_type!(
    /// A ref name: up to 200 bytes of `A-Z a-z 0-9 . _ - /`, no empty path
    /// segment, no `..`, no leading or trailing `/` (`sessions/s-42/head`).
    RefName,
    "name",
    |s| {
        check_name("name", s, 200, "use A-Z, a-z, 0-9, '.', '_', '-' and '/'", |_, c| {
            c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/')
        })?;
        if s.starts_with('/') || s.ends_with('/') || s.contains("//") || s.contains("..") {
            return Err(Error::invalid(
                "name",
                format!("ref name {s:?} has an empty segment, '..' or a leading or trailing '/'"),
            ));
        }
        Ok(())
    },
    schema: name_schema(
        REF_NAME_PATTERN,
        200,
        "A ref name: 1 to 200 of A-Z, a-z, 0-9, '.', '_', '-' and '/'; no empty segment, no '..', no leading or trailing '/'.",
    )
);

name_type!(
    /// A wrapper's session: what can follow `sessions/` in a ref name (its
    /// chain is the ref `sessions/<id>`), so 1 to 191 of `A-Z a-z 0-9 . _ -
    /// /`, no empty segment, no `..`. Refused, never altered: the same text
    /// names the same session in every route.
    SessionId,
    "session_id",
    |s| {
        if s.is_empty() {
            return Err(Error::invalid("session_id", "session_id is empty"));
        }
        if s.len() > 191 || format!("sessions/{s}").parse::<RefName>().is_err() {
            return Err(Error::invalid(
                "session_id",
                format!(
                    "session_id {s:?} cannot name the ref sessions/<id>: use 1 to 191 of A-Z, a-z, 0-9, '.', '_', '-' and '/', with no empty segment and no '..'"
                ),
            ));
        }
        Ok(())
    },
    schema: name_schema(
        REF_NAME_PATTERN,
        191,
        "A session: what can follow `sessions/` in a ref name; 1 to 191 of A-Z, a-z, 0-9, '.', '_', '-' and '/'; no empty segment, no '..', no leading or trailing '/'.",
    )
);

/// What [`RefName`] accepts, as a pattern: '/'-separated segments of
/// `A-Z a-z 0-9 . _ -`, none empty, no two dots in a row.
pub(crate) const REF_NAME_PATTERN: &str =
    r"^(?:(?:\.?[A-Za-z0-9_-]+)+\.?|\.)(?:/(?:(?:\.?[A-Za-z0-9_-]+)+\.?|\.))*$";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_what_can_name_their_ref_and_are_never_altered() {
        for ok in ["s1", "team-a/s1", "a.b_c-d", "x".repeat(191).as_str()] {
            let id: SessionId = ok.parse().unwrap();
            assert_eq!(id.as_str(), ok);
        }
        for bad in [
            "",
            "a\0b",
            " s",
            "s ",
            "a b",
            "a@b",
            "../x",
            "a//b",
            "/a",
            "a/",
            "x".repeat(192).as_str(),
        ] {
            let e = bad.parse::<SessionId>().unwrap_err();
            assert_eq!(e.field.as_deref(), Some("session_id"), "{bad:?}");
        }
    }
    use proptest::prelude::*;

    #[test]
    fn hash_wire_format_is_hex_in_json_and_bytes_in_binary() {
        let h = Hash::of(b"hello");
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(
            json,
            "\"ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f\""
        );
        assert_eq!(serde_json::from_str::<Hash>(&json).unwrap(), h);
        // CBOR is not human-readable: a byte string of 32 raw bytes.
        let mut cbor = Vec::new();
        ciborium::into_writer(&h, &mut cbor).unwrap();
        assert_eq!(cbor[..2], [0x58, 0x20]);
        assert_eq!(&cbor[2..], h.as_bytes());
        let back: Hash = ciborium::from_reader(&cbor[..]).unwrap();
        assert_eq!(back, h);
    }

    #[test]
    fn ids_parse_and_reject() {
        let c: CommitId = "ctx-0123456789abcdef0123456789abcdef".parse().unwrap();
        assert_eq!(c.to_string(), "ctx-0123456789abcdef0123456789abcdef");
        for bad in [
            "ctx-0123",
            "ctx-0123456789ABCDEF0123456789abcdef",
            "art-0123456789abcdef0123456789abcdef",
            "ctx-0123456789abcdef0123456789abcdeg",
            "",
        ] {
            let e = bad.parse::<CommitId>().unwrap_err();
            assert_eq!(e.kind, crate::ErrorKind::Invalid, "{bad}");
        }
        assert!(
            "br-0123456789abcdef0123456789abcdef"
                .parse::<BranchId>()
                .is_ok()
        );
        let a = ArtifactRef::of(b"x");
        assert_eq!(a.to_string().parse::<ArtifactRef>().unwrap(), a);
        assert!("art-xyz".parse::<ArtifactRef>().is_err());
    }

    #[test]
    fn names_validate() {
        assert!("acme-1".parse::<TenantId>().is_ok());
        assert!("-acme".parse::<TenantId>().is_err());
        assert!("Acme".parse::<TenantId>().is_err());
        assert!("agent@host".parse::<Principal>().is_ok());
        assert!("a\u{7}b".parse::<Principal>().is_err());
        assert!("sessions/s-42/head".parse::<RefName>().is_ok());
        for bad in ["", "/a", "a/", "a//b", "a/../b", "a b", "a?"] {
            assert!(bad.parse::<RefName>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_documented_ref_name_pattern_accepts_what_parses() {
        let re = regex_lite::Regex::new(REF_NAME_PATTERN).unwrap();
        for name in [
            "main",
            "sessions/s-42/head",
            ".",
            "a/./b",
            ".a.",
            "a.b_c-D",
            "",
            "/a",
            "a/",
            "a//b",
            "a/../b",
            "..",
            "a b",
            "a?",
            "é",
        ] {
            assert_eq!(
                re.is_match(name),
                name.parse::<RefName>().is_ok(),
                "{name:?}"
            );
        }
    }

    #[test]
    fn derived_ids_depend_on_every_input() {
        let t: TenantId = "t".parse().unwrap();
        let u: TenantId = "u".parse().unwrap();
        let a = ArtifactRef::of(b"a");
        let b = ArtifactRef::of(b"b");
        let p = CommitId::derive(&t, None, &a, 1, "x");
        let base = CommitId::derive(&t, Some(&p), &a, 1, "x");
        assert_eq!(base, CommitId::derive(&t, Some(&p), &a, 1, "x"));
        assert_ne!(base, CommitId::derive(&u, Some(&p), &a, 1, "x"));
        assert_ne!(base, CommitId::derive(&t, None, &a, 1, "x"));
        assert_ne!(base, CommitId::derive(&t, Some(&p), &b, 1, "x"));
        assert_ne!(base, CommitId::derive(&t, Some(&p), &a, 2, "x"));
        assert_ne!(base, CommitId::derive(&t, Some(&p), &a, 1, "y"));
    }

    proptest! {
        #[test]
        fn commit_ids_round_trip(bytes in any::<[u8; 16]>()) {
            let id = CommitId::from_bytes(bytes);
            prop_assert_eq!(id.to_string().parse::<CommitId>().unwrap(), id);
            let json = serde_json::to_string(&id).unwrap();
            prop_assert_eq!(serde_json::from_str::<CommitId>(&json).unwrap(), id);
        }

        #[test]
        fn hashes_round_trip(bytes in any::<[u8; 32]>()) {
            let h = Hash::from_bytes(bytes);
            prop_assert_eq!(h.to_string().parse::<Hash>().unwrap(), h);
        }

        #[test]
        fn parsing_arbitrary_text_never_panics(s in ".{0,80}") {
            let _ = s.parse::<CommitId>();
            let _ = s.parse::<ArtifactRef>();
            let _ = s.parse::<RefName>();
            let _ = s.parse::<TenantId>();
        }
    }
}
