//! What a request body's schema says beyond its fields, where utoipa's
//! derive cannot say it: which of several fields go together (exactly one
//! of `delta`, `delta_base64` and `artifact_ref`), which one needs another
//! (a compaction needs a parent, an `error` needs `status: failed`), and
//! how many of two lists fit together (a batch). Each rule is a JSON
//! Schema that a body of the type must satisfy besides its own fields, and
//! is written beside its type, in its family's file ([`Rules`]); [`all`]
//! lists them, and the document gives each such type as `allOf` its
//! fields and its rules (`api::ApiDoc`).
//!
//! The rules are written in the shapes the clients' generators read as
//! constraints between fields: a part holds one `oneOf` or `anyOf` whose
//! items say only `type`, `required` and `properties`. Every schema in a
//! rule names its `type`: utoipa reads no schema without one.

use std::borrow::Cow;

use serde_json::Value;
use utoipa::ToSchema;
use utoipa::openapi::schema::{AllOf, Schema};
use utoipa::openapi::{RefOr, schema::SchemaType};

/// A type whose schema says more than its fields.
pub(crate) trait Rules: ToSchema {
    /// The schemas a body of this type must satisfy besides its own, as
    /// JSON Schema.
    fn rules() -> Vec<Value>;
}

fn entry<T: Rules>() -> (Cow<'static, str>, Vec<Value>) {
    (T::name(), T::rules())
}

/// Every type with rules: its schema's name, and its rules.
pub(crate) fn all() -> Vec<(Cow<'static, str>, Vec<Value>)> {
    vec![
        entry::<super::CheckpointRequest>(),
        entry::<super::BatchRequest>(),
        entry::<super::BatchCommitRequest>(),
        entry::<super::BatchArtifact>(),
        entry::<super::BatchRefRequest>(),
        entry::<super::BranchReturnRequest>(),
    ]
}

/// `schema` with `rules`: `allOf` the schema (without its description)
/// and each rule, the description on top.
///
/// # Panics
/// When a rule is not a schema utoipa reads back as written (a test holds
/// every rule to that).
pub(crate) fn with_rules(schema: RefOr<Schema>, rules: &[Value]) -> RefOr<Schema> {
    let (description, fields) = match schema {
        RefOr::T(Schema::Object(mut o)) => (o.description.take(), RefOr::T(Schema::Object(o))),
        other => (None, other),
    };
    let mut all = AllOf::new();
    all.schema_type = SchemaType::AnyValue;
    all.description = description;
    all.items.push(fields);
    all.items.extend(
        rules
            .iter()
            .map(|r| schema_of(r).expect("a rule is a schema")),
    );
    RefOr::T(Schema::AllOf(all))
}

fn schema_of(rule: &Value) -> serde_json::Result<RefOr<Schema>> {
    serde_json::from_value(rule.clone())
}

/// Exactly one of `fields`, each a present, non-null value of its type:
/// `[(name, JSON type)]`.
pub(crate) fn exactly_one(fields: &[(&str, &str)]) -> Value {
    serde_json::json!({
        "oneOf": fields
            .iter()
            .map(|(name, ty)| serde_json::json!({
                "type": "object",
                "required": [name],
                "properties": {*name: {"type": ty}},
            }))
            .collect::<Vec<_>>(),
    })
}

/// Not both of `a` and `b`: one of them absent or null.
pub(crate) fn not_both(a: &str, b: &str) -> Value {
    serde_json::json!({
        "anyOf": [
            {"type": "object", "properties": {a: {"type": "null"}}},
            {"type": "object", "properties": {b: {"type": "null"}}},
        ],
    })
}

/// A compaction commit names its parent: `commit_type` is not
/// `compaction`, or one of `parents` (`[(name, JSON type)]`) is given.
pub(crate) fn compaction_has_a_parent(parents: &[(&str, &str)]) -> Value {
    use super::CommitType;
    let mut any = vec![serde_json::json!({
        "type": "object",
        "properties": {"commit_type": {
            "type": "string",
            "enum": [CommitType::Delta, CommitType::Snapshot],
        }},
    })];
    any.extend(parents.iter().map(|(name, ty)| {
        serde_json::json!({
            "type": "object",
            "required": [name],
            "properties": {*name: {"type": ty}},
        })
    }));
    serde_json::json!({ "anyOf": any })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// utoipa reads every rule back exactly as written: none of its
    /// keywords is dropped on the way into the document.
    #[test]
    fn every_rule_is_a_schema_as_written() {
        for (name, rules) in all() {
            assert!(!rules.is_empty(), "{name} has no rules");
            for rule in rules {
                let schema = schema_of(&rule).unwrap_or_else(|e| panic!("{name}: {e}: {rule}"));
                assert_eq!(serde_json::to_value(&schema).unwrap(), rule, "{name}");
            }
        }
    }
}
