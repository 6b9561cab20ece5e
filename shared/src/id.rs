//! Identifiers: the BLAKE3 [`Hash`](struct@Hash), prefixed ids (`art-…`, `ctx-…`,
//! `br-…`) and the validated names (tenant, principal, ref) that key data.
//!
//! Every id has a validating `FromStr`; nothing stringly-typed crosses a
//! module boundary.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

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

/// What a validated name accepts, as a pattern and a length: what its
/// schema on the wire states. JSON Schema counts characters where the rule
/// counts bytes; the description says which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameRule {
    /// A regular expression the whole name matches.
    pub pattern: String,
    /// At most this many bytes.
    pub max_bytes: usize,
    /// The rule in words.
    pub description: &'static str,
}

/// A [`NameRule`].
pub(crate) fn name_rule(pattern: &str, max_bytes: usize, description: &'static str) -> NameRule {
    NameRule {
        pattern: pattern.to_owned(),
        max_bytes,
        description,
    }
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

            /// How many bytes it holds (twice as many hex digits).
            pub const BYTES: usize = $n;

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

prefixed_id!(
    /// A memory's id, `mem-` + 32 hex digits, derived from the branch it
    /// was extracted from.
    MemoryId,
    "mem-",
    16,
    "memory_id"
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
    ($(#[$doc:meta])* $name:ident, $field:literal, $check:expr, rule: $rule:expr) => {
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

        impl $name {
            /// What the name accepts.
            pub fn rule() -> $crate::id::NameRule {
                $rule
            }
        }
    };
}
pub(crate) use name_type;

name_type!(
    /// A tenant: 1–64 characters of `a-z 0-9 - _`, starting with a letter
    /// or digit. Every stored key starts with it.
    TenantId,
    "tenant",
    |s| check_name("tenant", s, 64, "use a-z, 0-9, - and _, starting with a letter or digit", |i, c| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || (i > 0 && (c == '-' || c == '_'))
    }),
    rule: name_rule(
        "^[a-z0-9][a-z0-9_-]*$",
        64,
        "A tenant: 1 to 64 of a-z, 0-9, '-' and '_', starting with a letter or digit.",
    )
);

name_type!(
    /// Who checkpointed: an agent, a user or a service; 1 to 256 of `A-Z
    /// a-z 0-9 . _ - / @ : +` (`agent-7`, `alice@example.com`,
    /// `team/bot:claude`). Like ref and session names it has no spaces or
    /// other characters that need quoting.
    Principal,
    "principal",
    |s| check_name(
        "principal",
        s,
        256,
        "use A-Z, a-z, 0-9, '.', '_', '-', '/', '@', ':' and '+'",
        |_, c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | '@' | ':' | '+'),
    ),
    rule: name_rule(
        PRINCIPAL_PATTERN,
        256,
        "Who checkpointed: 1 to 256 of A-Z, a-z, 0-9, '.', '_', '-', '/', '@', ':' and '+'.",
    )
);

/// What [`Principal`] accepts, as a pattern.
pub(crate) const PRINCIPAL_PATTERN: &str = r"^[A-Za-z0-9._/@:+-]+$";

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
    rule: name_rule(
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
    rule: name_rule(
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
mod tests;
