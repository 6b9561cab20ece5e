//! The schemas of the ids and names the wire carries as strings: each
//! states what the type's own parser accepts (its prefix and hex length, or
//! its [`NameRule`]), so the document and the server never disagree.

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

use crate::agent::SaveId;
use crate::format::FormatId;
use crate::id::{
    ArtifactRef, BranchId, CommitId, MemoryId, NameRule, Principal, RefName, SessionId, TenantId,
};
use crate::workspace::{FilePath, WorkspaceId};

fn string_schema(pattern: &str, description: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(pattern))
        .description(Some(description))
        .into()
}

/// The schema of a `prefix-<hex>` id over `bytes` bytes.
fn prefixed_schema(prefix: &str, bytes: usize) -> RefOr<Schema> {
    // Two hex digits a byte: the pattern counts digits, not bytes.
    string_schema(
        &format!("^{prefix}[0-9a-f]{{{}}}$", bytes * 2),
        &format!("An id: `{prefix}` and {} lower-case hex digits.", bytes * 2),
    )
}

/// The schema of a validated name.
fn name_schema(rule: NameRule) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(rule.pattern))
        .min_length(Some(1))
        .max_length(Some(rule.max_bytes))
        .description(Some(rule.description))
        .into()
}

/// A format this server has a codec for (a schema only: the parameter is
/// a [`FormatId`] that [`crate::format::Formats::is_known`] holds of): where
/// the server refuses any other format, the document lists them.
pub struct KnownFormat;

impl PartialSchema for KnownFormat {
    fn schema() -> RefOr<Schema> {
        let formats = crate::format::Formats::default();
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(formats.ids().map(FormatId::as_str)))
            .description(Some("A format this server has a codec for."))
            .into()
    }
}

impl ToSchema for KnownFormat {}

/// A pin's name (a schema only: the handlers read the path themselves): a
/// session id, or a ref name of at most as many bytes, whichever the
/// route's `kind` says; the limit holds of both kinds because a schema
/// cannot make one path parameter depend on the other.
pub struct PinName;

impl PinName {
    /// The most bytes a pin's name has: a session id's limit.
    pub fn max_bytes() -> usize {
        SessionId::rule().max_bytes
    }
}

impl PartialSchema for PinName {
    fn schema() -> RefOr<Schema> {
        name_schema(NameRule {
            description: "A pin's name: a session id, or a ref name of at most 191 bytes \
                          (a session id's limit); may contain '/'.",
            ..SessionId::rule()
        })
    }
}

impl ToSchema for PinName {}

macro_rules! schemas {
    ($($t:ty => $schema:expr;)*) => {
        $(
            impl PartialSchema for $t {
                fn schema() -> RefOr<Schema> {
                    $schema
                }
            }

            impl ToSchema for $t {}
        )*
    };
}

schemas! {
    CommitId => prefixed_schema(CommitId::PREFIX, CommitId::BYTES);
    BranchId => prefixed_schema(BranchId::PREFIX, BranchId::BYTES);
    MemoryId => prefixed_schema(MemoryId::PREFIX, MemoryId::BYTES);
    ArtifactRef => string_schema(
        "^art-[0-9a-f]{64}$",
        "An artifact: `art-` and the BLAKE3 hash of its bytes in lower-case hex.",
    );
    SaveId => string_schema("^sav-[0-9a-f]{32}$", "A save id.");
    FormatId => string_schema("^[a-z0-9][a-z0-9._-]{0,63}$", "A format id such as `raw`.");
    TenantId => name_schema(TenantId::rule());
    Principal => name_schema(Principal::rule());
    RefName => name_schema(RefName::rule());
    SessionId => name_schema(SessionId::rule());
    WorkspaceId => name_schema(WorkspaceId::rule());
    FilePath => name_schema(FilePath::rule());
}
